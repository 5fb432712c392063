"""Audio post-processing in the API process, the speech pipeline's last stage: the model's PCM
resampled, its tempo stretched and encoded to the wire formats, as each chunk arrives."""
