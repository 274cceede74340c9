"""The submit pipeline: options -> spec -> plan -> prediction -> objects -> backend."""
