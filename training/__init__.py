"""How the built-in voices were made: teacher data, student and decoder training. Nothing that
serves imports this package; it needs the dev extras (tqdm)."""
