"""`rltrain export`: the deterministic policy as one ONNX or TorchScript file, checked.

`module` wraps a trained policy with the observation normalization and the action mapping
folded in, `formats` writes and reloads ONNX / TorchScript files, `check` compares an export
with the torch policy on random observations, `command` ties them to a checkpoint.
"""
