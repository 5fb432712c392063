"""Block-paged KV cache: block pool, prefix cache, per-request block tables, tensor sizing."""
