"""Shared test set-up: a test that patches the code (monkeypatch) runs on engines of its own."""
import pytest


@pytest.fixture(autouse=True)
def _fresh_engines(request):
    """cosim.lockstep.run_many keeps elaborated engines for the next call with the same build; one
    built while a test patched the RTL's code (a rule moved by a cycle) must not serve another test,
    nor one built before serve the patched test."""
    if "monkeypatch" not in request.fixturenames:
        yield
        return
    from tensore.cosim import lockstep
    lockstep.forget_engines()
    yield
    lockstep.forget_engines()
