"""Networks: MLP bodies, image encoders, actor heads and critics; `config.py` (`net.*`) and
`spec.py` decide their layers."""
