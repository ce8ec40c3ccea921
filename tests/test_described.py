"""A Keras model the side process opened and described (reporter.inputs.described, issue 67): the run reads the same
inputs, outputs and batch from the description as from the model it would have loaded, converts the same float model
when it has to export the model itself, and loads the model itself when the side process could not describe it."""

import pytest


def _tensors(tensors) -> list:
    return [(str(t.name), tuple(None if d is None else int(d) for d in t.shape)) for t in tensors]


@pytest.mark.parametrize("target", [None, "micro"])
def test_the_description_answers_what_the_loaded_model_does(target, mlp_files, tmp_path, capfd):
    from reporter.convert import converter
    from reporter.inputs import described, model_loading

    model_path, _ = mlp_files
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    facts = described.describe(str(model_path), False, target=target)  # what the side process hands the run
    here = described.load_described(model_path, lambda: facts, scratch=tmp_path / "a", target=target)
    said = capfd.readouterr().err
    loaded = model_loading.load_model(model_path, scratch=tmp_path / "b", target=target)
    try:
        stand_in, real = here.keras_model, loaded.keras_model
        assert isinstance(stand_in, described.DescribedModel) and stand_in._model is None  # not loaded here
        assert _tensors(stand_in.inputs) == _tensors(real.inputs) and len(real.inputs) == 1
        # (an output tensor's own name counts Keras's tensors in the process; the run reads the outputs' names)
        assert [shape for _, shape in _tensors(stand_in.outputs)] == [shape for _, shape in _tensors(real.outputs)]
        assert stand_in.output_names == list(getattr(real, "output_names", None) or [])  # (none for a Sequential)
        assert here.static_batch == loaded.static_batch and bool(here.static_batch) == (target == "micro")
        assert ("static batch of 1" in said) == (target == "micro")
        # No export from the side process here: the run exports the model itself, loading it now; the same float
        # model as the one the run converts when it loads the model at once.
        ours = converter.convert(here.make_converter, "float", None)
        assert stand_in._model is not None
        assert ours == converter.convert(loaded.make_converter, "float", None)
    finally:
        here.make_converter.cleanup()
        loaded.make_converter.cleanup()


@pytest.mark.parametrize("facts", ["failed", "twin"])
def test_without_a_description_the_run_loads_the_model_itself(facts, mlp_files, tmp_path):
    from reporter.inputs import described

    model_path, _ = mlp_files

    def given():
        if facts == "failed":
            raise RuntimeError("the side process died")
        return {"twin": True}

    loaded = described.load_described(model_path, given, scratch=tmp_path)
    try:
        assert not isinstance(loaded.keras_model, described.DescribedModel)
        assert _tensors(loaded.keras_model.inputs)  # the Keras model itself
    finally:
        loaded.make_converter.cleanup()
