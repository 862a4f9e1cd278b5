"""The tile layer: the ``T.cuda.tile.apply`` op, instruction families, and its lowering."""
