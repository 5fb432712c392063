"""OpenAI's speech API on the shared pipeline (api/speech/): `POST /v1/audio/speech` (audio or
server-sent events), the model and voice listings, and OpenAI's error shape, which the app also
answers in wherever a route has no shape of its own."""
