"""Audio post-processing in the API process: resampling, tempo, encoding to the wire formats."""
