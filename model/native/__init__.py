"""C kernels for the CPU path, where a handful of torch ops on small tensors costs more in dispatch
than in work: compiled on first use (build.py), bound with ctypes by the module that uses each, and
always beside a torch path that computes the same thing."""
