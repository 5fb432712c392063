"""The speech pipeline every protocol shares, in a request's order: its model, voice, language and
instructions resolved (catalog, into one voice_choice), its text cut into segments (text_split,
text_stream, planning), each prepared into a prompt (prompt_pool) and synthesized by
the engine in turn (start, synthesis, backpressure), its audio converted and encoded (audio/,
streaming) with its words timed (word_timeline). The protocols (openai/, deepgram/, `chorus say`)
sit on top and render its errors (errors) in their own shapes."""
