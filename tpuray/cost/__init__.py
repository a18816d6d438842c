"""Prices and what a stack costs: the price book (tpuray/data/prices.yaml and Cloud Billing's
catalog), the cost table of `tpuray preview` and `tpuray cost`, and LLM token costs."""
