"""HTTP plumbing, around every route whatever its protocol: the middlewares that run before a
route (query check, body limit, key), the uvicorn protocols and server with its shutdown drain,
the supervisor `chorus serve` runs as, metrics and the status routes, and the helpers routes
share (bounded JSON, quoting, disconnects)."""
