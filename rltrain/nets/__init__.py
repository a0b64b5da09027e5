"""Networks: MLP bodies, actor heads and critics."""
