"""The `joe` voice's training pipeline: teacher data (`make_data`), the student (`train`) and its
decoder head (`train_decoder`); see README.md beside this file."""
