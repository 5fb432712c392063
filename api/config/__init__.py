"""Configuration, read once at startup before any request: the API's settings and the command-line
flags of `chorus serve` and of the engine, which build them."""
