"""Deepgram's text-to-speech API ("speak", v1) on Chorus's engine: `POST /v1/speak` (a whole
text, audio streamed back) and the `/v1/speak` WebSocket (text in pieces, Flush, Clear, Close),
so that Deepgram's SDK and the voice-agent frameworks' Deepgram services work with only their
base URL changed."""
