"""acceptance_length on every door (GET and POST /v1/capacity, the CLI): the decode step a
verify step of 1 + num_speculative_tokens tokens, the speed per emitted token; refused by name
without vLLM's speculative_config or above 1 + num_speculative_tokens. The figures are the
sizing core's (tests/sizing/test_speculative_speed.py works them by hand); here the doors agree.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from tests.helpers import problem

NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
QUESTION: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "gpu": "h100-sxm-80gb",
    "max_model_len": 8192,
    "engine_version": "0.33.0",
}


def test_get_and_post_agree_and_the_speed_is_per_emitted_token(client: TestClient) -> None:
    plain = client.post("/v1/capacity", json={**QUESTION, "speculative_config": NGRAM}).json()
    posted = client.post(
        "/v1/capacity",
        json={**QUESTION, "speculative_config": NGRAM, "acceptance_length": 2.5},
    )
    got = client.get(
        "/v1/capacity",
        params={**QUESTION, "speculative_config": json.dumps(NGRAM), "acceptance_length": 2.5},
    )
    assert posted.status_code == got.status_code == 200, posted.text
    fast = posted.json()
    assert got.json()["decode_ms_per_token"] == fast["decode_ms_per_token"]
    # GET keeps answers by question: without acceptance_length it is another question.
    got_plain = client.get(
        "/v1/capacity", params={**QUESTION, "speculative_config": json.dumps(NGRAM)}
    ).json()
    assert got_plain["decode_ms_per_token"] == plain["decode_ms_per_token"]
    # Without acceptance_length no speed-up is claimed: the plain decode step.
    assert fast["decode_ms_per_token"] != plain["decode_ms_per_token"]
    # tokens/s = sequences x 1000 / TPOT, whatever the step: the running batch is unchanged.
    batch = fast["output_tokens_per_second"] * fast["decode_ms_per_token"] / 1e3
    plain_batch = plain["output_tokens_per_second"] * plain["decode_ms_per_token"] / 1e3
    assert round(batch) == round(plain_batch)


def test_refused_by_name(client: TestClient) -> None:
    alone = client.post("/v1/capacity", json={**QUESTION, "acceptance_length": 2})
    assert problem(alone, 422)["field"] == "acceptance_length"
    too_long = client.post(
        "/v1/capacity",
        json={**QUESTION, "speculative_config": NGRAM, "acceptance_length": 4.5},
    )
    assert problem(too_long, 422)["field"] == "acceptance_length"
    below = client.get("/v1/capacity", params={**QUESTION, "acceptance_length": 0.5})
    assert problem(below, 422)["field"] == "acceptance_length"
