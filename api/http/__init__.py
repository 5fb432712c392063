"""HTTP plumbing, around every route whatever its protocol: the middlewares that run before a
route (query check, body limit, key), the uvicorn protocols and server with its shutdown drain,
metrics and the status routes, and the helpers routes share (bounded JSON, quoting, disconnects)."""
