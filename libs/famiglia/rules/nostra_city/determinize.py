"""determinize(view, seat, rng): placeholder, replaced below."""
