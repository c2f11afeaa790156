"""What a run reports: metrics, the metrics file, the loss plot, W&B, and the recorder that feeds them."""
