"""What a backend prepares a job from: its plan (placement and prediction), a fresh SSH key
pair, and the built-in benchmark's source."""
