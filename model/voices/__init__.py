"""Built-in voices: teacher pipelines and codecs of the voices Chorus ships."""
