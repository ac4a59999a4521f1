"""A study's own experiment (``study: …``, where its runs live) is kept out of the experiments list
and the study's base picker unless asked for."""

from __future__ import annotations

from db.store import Store
from db.study_store import StudyStore
from tests.app.test_app_studies import _finished_study


def test_study_experiments_are_filtered_out_until_asked_for(app, store: Store, experiment: int,
                                                             make_config) -> None:
    study_id = _finished_study(store, experiment, make_config)
    own = StudyStore(store).get_study(study_id).experiment_id
    assert own != experiment
    at = app("experiments", experiment=experiment)
    assert not at.exception
    assert at.dataframe[0].value["id"].tolist() == [experiment]  # "study: lr" hidden
    assert any("1 study experiment hidden" in c.value for c in at.caption)
    at.toggle(key="exp_show_studies").set_value(True).run()
    assert sorted(at.dataframe[0].value["id"].tolist()) == sorted([experiment, own])
    at = app("studies")
    assert at.selectbox(key="st_base").options == ["demo"]  # a study starts from a real experiment
