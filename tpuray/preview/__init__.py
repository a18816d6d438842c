"""The offline preview: the real program under Pulumi's mock engine (mockrun), the preview's
forked runner, the rendered objects (render), what differs from a recorded preview (diff, with the
provider's ForceNew fields) and what the emulator does not enforce (explain)."""
