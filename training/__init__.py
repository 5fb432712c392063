"""How the built-in voices were made: teacher data, student and decoder training, on one trainer
skeleton (trainer.py, command.py). Nothing that serves imports this package; it needs the dev
extras (tqdm)."""
