"""Hydra's per-compose repository copies share rltrain's ConfigStore instead of copying it."""

from __future__ import annotations

import copy

from hydra.core.config_store import ConfigStore

from rltrain.config.store import register_configs


def test_repository_copies_share_the_store_and_loads_still_hand_out_copies():
    register_configs([])
    store = ConfigStore.instance()
    assert copy.deepcopy({"source": store})["source"] is store
    # what makes sharing safe: a loaded node is a copy, so a compose that edits it leaves the
    # stored schema as it was
    loaded = store.load("train_schema.yaml").node
    assert loaded.seed != 12345
    loaded.seed = 12345
    assert store.load("train_schema.yaml").node.seed != 12345
