"""Metric sinks: TensorBoard, CSV, console progress."""
