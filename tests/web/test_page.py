"""The page at `/`, driven in a real headless Chromium (Debian's `chromium` + `chromedriver`).

The tests start kvplan as a newcomer does (`make run`): the `kvplan` entry point runs
`migrate`, `seed` and `serve` on an SQLite file named by DATABASE_URL, the variable a user
sets, with no test-only layer: the page bears the policy every user's browser gets
(`middleware.policy_for`). They fill the form as a person would, check the figures the page
shows against the API's own answer to the same question, that both pictures load, that the
link and the CSV of a plan are the same question and plan, that a read key never reaches a URL,
and that the browser logged no error and no policy violation. Screenshots are kept under
.artifacts/web/ (git-ignored).

Without Chromium and its driver these tests fail rather than skip:
`apt-get install -y chromium chromium-driver` (.ci/run does).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / ".artifacts" / "web"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# The `kvplan` command pip installed beside this interpreter ([project.scripts] in pyproject).
KVPLAN = Path(sys.executable).with_name("kvplan")
READ_KEY = "page-key"
# Qwen3-8B's config.json as Qwen publishes it, byte for byte (tests/fixtures/hf_configs/SOURCES.md).
QWEN3_8B = REPO / "tests" / "fixtures" / "hf_configs" / "Qwen--Qwen3-8B.json"
# The first 40 requests of Azure's 2023 conversation trace, in its own columns
# (tests/fixtures/traces/SOURCES.md).
AZURE_HEAD = REPO / "tests" / "fixtures" / "traces" / "azure_conv_2023_head.csv"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kvplan(env: dict[str, str], *args: str) -> None:
    done = subprocess.run(
        [str(KVPLAN), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An SQLite file migrated and seeded by `kvplan migrate` and `kvplan seed` (`make run`)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'kvplan.db'}"
    env = {**os.environ, "DATABASE_URL": url}
    _kvplan(env, "migrate")
    _kvplan(env, "seed")
    return url


@contextmanager
def _serving(database: str, log: Path, read_keys: str = "") -> Iterator[str]:
    """`kvplan serve` on a loopback port, configured as a user configures it: environment."""
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database,
        "KVPLAN_READ_KEYS": read_keys,
        "KVPLAN_LOG_LEVEL": "WARNING",
    }
    with log.open("wb") as out:
        server = subprocess.Popen(
            [str(KVPLAN), "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the server did not answer in 30 s"
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="module")
def base_url(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("server") / "kvplan.log"
    with _serving(database, log) as url:
        yield url


@pytest.fixture(scope="module")
def keyed_url(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The same, with reads that need the key `page-key` (KVPLAN_READ_KEYS)."""
    log = tmp_path_factory.mktemp("keyed-server") / "kvplan.log"
    with _serving(database, log, read_keys=READ_KEY) as url:
        yield url


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    for path in (CHROMIUM, CHROMEDRIVER):
        if shutil.which(path) is None:
            pytest.fail(f"{path} is missing: apt-get install -y chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="kvplan-chromium-")
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        # no calls home: this machine's network is closed, and a test must not depend on it
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--no-first-run",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _errors(driver: WebDriver) -> list[dict[str, Any]]:
    """Every SEVERE entry of the browser's log: a script error, a policy violation ("security"),
    a failed load ("network")."""
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def _only_the_refusals(errors: list[dict[str, Any]], status: int) -> None:
    """The errors are the browser's own notes of answers with `status`, nothing else: a page
    cannot keep Chromium from logging a 4xx it asked for, but it must cause no other error."""
    assert errors, "the refusal was not asked"
    for entry in errors:
        assert entry["source"] == "network", entry
        assert f"status of {status}" in entry["message"], entry


def _options(driver: WebDriver, element_id: str) -> list[str]:
    return [
        o.get_attribute("value") or ""
        for o in Select(driver.find_element(By.ID, element_id)).options
    ]


def _catalog(base_url: str, kind: str) -> list[str]:
    """Every slug of a catalog list, following `next` as the page does."""
    slugs: list[str] = []
    path: str | None = f"/v1/{kind}?limit=500"
    while path:
        page = httpx.get(f"{base_url.rstrip('/')}{path}").json()
        slugs += [item["slug"] for item in page["items"]]
        path = page["next"]
    return slugs


def _link(driver: WebDriver) -> str:
    return driver.find_element(By.ID, "share-link").get_attribute("href") or ""


def _csv(driver: WebDriver) -> str:
    """The text of the page's CSV download (a data: URL)."""
    href = driver.find_element(By.ID, "csv-link").get_attribute("href") or ""
    prefix = "data:text/csv;charset=utf-8,"
    assert href.startswith(prefix), href[:80]
    return unquote(href.removeprefix(prefix))


def _form(driver: WebDriver) -> dict[str, str]:
    ids = ("model", "gpu", "engine", "max-model-len", "peak-concurrency", "kv-cache-dtype")
    return {i: driver.find_element(By.ID, i).get_attribute("value") or "" for i in ids}


def _open(driver: WebDriver, base_url: str) -> None:
    driver.get(base_url)
    WebDriverWait(driver, 30).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-catalog") == "loaded"
    )


def _type(driver: WebDriver, element_id: str, text: str) -> None:
    field = driver.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(text)


def _ask(driver: WebDriver, *, context: str, peak: str, dtype: str, gpu: str = "") -> None:
    Select(driver.find_element(By.ID, "gpu")).select_by_value(gpu)
    _type(driver, "max-model-len", context)
    _type(driver, "peak-concurrency", peak)
    Select(driver.find_element(By.ID, "kv-cache-dtype")).select_by_value(dtype)
    driver.find_element(By.ID, "submit").click()
    WebDriverWait(driver, 60).until(
        lambda d: (
            d.find_element(By.ID, "result").get_attribute("data-state") in ("ready", "problem")
        )
    )


def _figures(driver: WebDriver) -> dict[str, tuple[str, str]]:
    """Each figure the page shows: (the value it holds, the text a person reads)."""
    return {
        element.get_attribute("data-field") or "": (
            element.get_attribute("data-value") or "",
            element.text,
        )
        for element in driver.find_elements(By.CSS_SELECTOR, ".figures dd")
    }


def _screenshot(driver: WebDriver, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(int(height), 6000))
    path = ARTIFACTS / name
    assert driver.save_screenshot(str(path))
    return path


def _check_against(figures: dict[str, tuple[str, str]], best: dict[str, Any]) -> None:
    for field in ("gpu", "tensor_parallel_size", "replicas", "total_gpus", "max_num_seqs"):
        assert figures[field][0] == str(best[field]), field
    for field in ("tensor_parallel_size", "replicas", "total_gpus", "max_num_seqs"):
        assert figures[field][1] == f"{best[field]:,}", field
    assert figures["kv_pool_bytes"][1] == f"{best['kv_pool_bytes'] / (1 << 30):.2f} GiB"
    assert figures["gpu"][1] == f"{best['gpu_name']} ({best['gpu']})"
    cost = best["cost_per_hour_usd"]
    assert figures["cost_per_hour_usd"][1] == ("no price known" if cost is None else f"${cost:.2f}")


def _plan_json(base_url: str, question: dict[str, Any], key: str = "") -> dict[str, Any]:
    headers = {"X-API-KEY": key} if key else {}
    answer = httpx.post(f"{base_url}v1/plans", json=question, headers=headers)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _plan_csv(base_url: str, question: dict[str, Any], key: str = "") -> str:
    headers = {"Accept": "text/csv", **({"X-API-KEY": key} if key else {})}
    answer = httpx.post(f"{base_url}v1/plans", json=question, headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.text


def _wait_for_the_answer(driver: WebDriver) -> str:
    WebDriverWait(driver, 60).until(
        lambda d: (
            d.find_element(By.ID, "result").get_attribute("data-state") in ("ready", "problem")
        )
    )
    return driver.find_element(By.ID, "result").get_attribute("data-state") or ""


def test_a_persons_whole_flow(browser: WebDriver, base_url: str) -> None:
    # 1. The page opens and the catalog fills both lists (every model and GPU, in its order).
    _open(browser, base_url)
    assert _options(browser, "model") == ["", *_catalog(base_url, "models")]
    assert _options(browser, "gpu") == ["", *_catalog(base_url, "gpus")]
    assert _errors(browser) == []

    # 2. A plan for a catalog model: the API's figures, the flags to paste, both pictures.
    # (110 at the peak: with the default 10% headroom its decode step has 4-decimal ms, which
    # step 2's check of the page's digits needs; 100 gives 17.77.)
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-8b")
    _ask(browser, context="8192", peak="110", dtype="fp8", gpu="h100-sxm-80gb")
    assert browser.find_element(By.ID, "result").get_attribute("data-state") == "ready"
    question = {
        "model": "llama-3.1-8b",
        "max_model_len": 8192,
        "peak_concurrency": 110,
        "kv_cache_dtype": "fp8",
        "engine": "vllm",
        "gpus": ["h100-sxm-80gb"],
    }
    answer = _plan_json(base_url, {**question, "explain": True})
    best = answer["recommendation"]
    _check_against(_figures(browser), best)
    assert browser.find_element(By.ID, "result-flags").text.startswith(
        "# vllm\n" + best["engine_flags"]["vllm"]
    )
    # both pictures are <img> tags on the GET endpoints, and both load (760 x 440 px)
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script(
            "return [...document.images].every(i => i.complete && i.naturalWidth > 0)"
        )
    )
    images = browser.find_elements(By.CSS_SELECTOR, ".picture img")
    assert len(images) == 2
    for image in images:
        assert "v1/pictures/" in (image.get_attribute("src") or "")
        assert browser.execute_script("return arguments[0].naturalWidth", image) == 760
    # the explanation, step by step, with the figures of the answer
    steps = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "#explanation h4")]
    assert "kv bytes per token" in steps
    assert "memory budget" in steps
    assert "replicas" in steps
    explanation = browser.find_element(By.ID, "explanation").text
    assert answer["explanation"]["concurrency"]["formula"] in explanation
    # fractions keep the digits the API gave (the browser's default, three fraction digits,
    # would show the decode step's 4-decimal milliseconds rounded)
    decode_ms = answer["explanation"]["performance"]["decode_ms_per_token"]
    assert round(decode_ms, 3) != decode_ms
    assert f"{decode_ms:,}" in explanation
    # the form was answered in place: nothing of it went into the page's URL
    assert browser.current_url == base_url
    _screenshot(browser, "plan-from-the-catalog.png")
    assert _errors(browser) == []

    # 3. The plan as CSV is the API's CSV of the same question.
    assert _csv(browser) == _plan_csv(base_url, question)

    # 4. The link to the question names its fields as the API does; opened afresh, it fills
    # the form and shows the same plan.
    link = _link(browser)
    assert link.split("#")[0] == base_url
    assert parse_qs(urlsplit(link).fragment) == {
        "model": ["llama-3.1-8b"],
        "gpus": ["h100-sxm-80gb"],
        "engine": ["vllm"],
        "max_model_len": ["8192"],
        "peak_concurrency": ["110"],
        "kv_cache_dtype": ["fp8"],
    }
    browser.get("about:blank")
    _open(browser, link)
    assert _wait_for_the_answer(browser) == "ready"
    assert _form(browser) == {
        "model": "llama-3.1-8b",
        "gpu": "h100-sxm-80gb",
        "engine": "vllm",
        "max-model-len": "8192",
        "peak-concurrency": "110",
        "kv-cache-dtype": "fp8",
    }
    _check_against(_figures(browser), best)
    assert _errors(browser) == []

    # 5. A config.json pasted as published (Qwen3-8B, not in the catalog), planned and drawn.
    published = QWEN3_8B.read_text()
    browser.find_element(By.CSS_SELECTOR, 'input[name="model-source"][value="config"]').click()
    assert browser.find_element(By.ID, "model").is_displayed() is False
    browser.find_element(By.ID, "hf-config").send_keys(published)
    _ask(browser, context="16384", peak="32", dtype="auto", gpu="h100-sxm-80gb")
    assert browser.find_element(By.ID, "result").get_attribute("data-state") == "ready"
    pasted = {
        "model": {"hf_config": json.loads(published)},
        "max_model_len": 16384,
        "peak_concurrency": 32,
        "kv_cache_dtype": "auto",
        "engine": "vllm",
        "gpus": ["h100-sxm-80gb"],
    }
    best = _plan_json(base_url, pasted)["recommendation"]
    _check_against(_figures(browser), best)
    # a pasted model cannot go in a URL: the pictures are POSTed and placed inline as SVG
    assert len(browser.find_elements(By.CSS_SELECTOR, ".picture svg")) == 2
    segments = browser.find_elements(By.CSS_SELECTOR, ".picture svg rect[data-segment]")
    assert {s.get_attribute("data-segment") for s in segments} == {
        "weights",
        "overhead",
        "kv_in_use",
        "headroom",
    }
    assert _csv(browser) == _plan_csv(base_url, pasted)
    # its link carries the config itself, and opens with it pasted
    link = _link(browser)
    assert json.loads(parse_qs(urlsplit(link).fragment)["hf_config"][0]) == json.loads(published)
    browser.get("about:blank")
    _open(browser, link)
    assert _wait_for_the_answer(browser) == "ready"
    assert browser.find_element(By.ID, "hf-config").is_displayed()
    assert json.loads(browser.find_element(By.ID, "hf-config").get_attribute("value") or "") == (
        json.loads(published)
    )
    _check_against(_figures(browser), best)
    _screenshot(browser, "plan-from-a-config.png")
    assert _errors(browser) == []

    # 6. A question kvplan refuses: its problem, readable, naming the field.
    browser.find_element(By.CSS_SELECTOR, 'input[name="model-source"][value="catalog"]').click()
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-8b")
    # DeepSeek's packed sparse-MLA cache, asked for a model without MLA: kvplan refuses (422)
    _ask(browser, context="8192", peak="64", dtype="fp8_ds_mla")
    assert browser.find_element(By.ID, "result").get_attribute("data-state") == "problem"
    problem = browser.find_element(By.ID, "problem")
    assert problem.is_displayed()
    assert problem.get_attribute("data-field") == "kv_cache_dtype"
    assert problem.text.startswith("kv_cache_dtype: ")
    assert "use fp8" in problem.text  # the problem's detail, as kvplan wrote it
    _only_the_refusals(_errors(browser), 422)


def test_any_gpu_lets_the_plan_choose(browser: WebDriver, base_url: str) -> None:
    _open(browser, base_url)
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-70b")
    Select(browser.find_element(By.ID, "engine")).select_by_value("sglang")
    _ask(browser, context="32768", peak="64", dtype="fp8")
    question = {
        "model": "llama-3.1-70b",
        "max_model_len": 32768,
        "peak_concurrency": 64,
        "kv_cache_dtype": "fp8",
        "engine": "sglang",
    }
    answer = _plan_json(base_url, question)
    _check_against(_figures(browser), answer["recommendation"])
    rows = browser.find_elements(By.CSS_SELECTOR, "#alternatives tbody tr")
    assert len(rows) == min(8, len(answer["alternatives"]))
    # no GPU chosen: the link names none, and the CSV is every option of the whole catalog
    assert "gpus" not in parse_qs(urlsplit(_link(browser)).fragment)
    assert _csv(browser) == _plan_csv(base_url, question)
    assert _errors(browser) == []


def test_a_two_node_plan_shows_every_node_and_draws_what_it_sized(
    browser: WebDriver, base_url: str
) -> None:
    # Llama-3.1-405B at 131,072 tokens fits no single H100 node; the plan spans two (TP 8 x PP 2,
    # README's multi-node example). The page pastes each node's flags, and its pictures ask the
    # same layout, stages included: the memory picture must not say "Does not fit".
    _open(browser, base_url)
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-405b")
    _ask(browser, context="131072", peak="4", dtype="auto", gpu="h100-sxm-80gb")
    question = {
        "model": "llama-3.1-405b",
        "max_model_len": 131072,
        "peak_concurrency": 4,
        "kv_cache_dtype": "auto",
        "engine": "vllm",
        "gpus": ["h100-sxm-80gb"],
    }
    best = _plan_json(base_url, question)["recommendation"]
    assert best["pipeline_parallel_size"] == 2
    flags = browser.find_element(By.ID, "result-flags").text
    for engine, lines in best["node_flags"].items():
        for rank, line in enumerate(lines):
            assert f"# {engine}, node {rank}\n{line}" in flags
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script(
            "return [...document.images].every(i => i.complete && i.naturalWidth > 0)"
        )
    )
    sources = [
        i.get_attribute("src") or "" for i in browser.find_elements(By.CSS_SELECTOR, ".picture img")
    ]
    assert sources
    assert all("pipeline_parallel_size=2" in src for src in sources)
    budget = next(src for src in sources if "memory-budget" in src)
    svg = urllib.request.urlopen(budget).read().decode()
    assert "Does not fit" not in svg
    assert _errors(browser) == []


def test_a_link_with_a_field_the_page_does_not_know_is_refused_by_name(
    browser: WebDriver, base_url: str
) -> None:
    # `max_model_length` is not the API's name (max_model_len): the page says so, asks nothing
    _open(browser, f"{base_url}#model=llama-3.1-8b&max_model_length=8192")
    problem = browser.find_element(By.ID, "problem")
    WebDriverWait(browser, 30).until(lambda d: problem.is_displayed())
    assert problem.get_attribute("data-field") == "max_model_length"
    assert "max_model_length" in problem.text
    assert browser.find_element(By.ID, "result").get_attribute("data-state") is None
    assert _errors(browser) == []


def test_where_reads_need_a_key_the_page_asks_for_it(browser: WebDriver, keyed_url: str) -> None:
    browser.get(keyed_url)
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "problem").is_displayed())
    assert browser.find_element(By.ID, "key-box").get_attribute("open") is not None
    assert "read key" in browser.find_element(By.ID, "problem").text
    # the only errors logged are the browser's notes of the two 401s before the key was typed
    _only_the_refusals(_errors(browser), 401)
    visited = browser.execute_script("return history.length")
    # the catalog loads once the key is typed (the change event on leaving the field)
    _type(browser, "api-key", READ_KEY)
    browser.find_element(By.ID, "max-model-len").click()
    WebDriverWait(browser, 30).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-catalog") == "loaded"
    )
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-8b")
    _ask(browser, context="8192", peak="16", dtype="fp8", gpu="h100-sxm-80gb")
    assert browser.find_element(By.ID, "result").get_attribute("data-state") == "ready"
    # an <img> cannot send the key's header: the pictures are fetched and placed inline
    assert len(browser.find_elements(By.CSS_SELECTOR, ".picture svg")) == 2
    assert browser.find_elements(By.CSS_SELECTOR, ".picture img") == []
    # the key went in headers only: in no URL the page asked, nor its own URL or history
    asked = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert any(url.endswith("v1/plans") for url in asked), asked  # the fetches are listed
    assert [url for url in asked if READ_KEY in url] == []
    assert browser.current_url == keyed_url
    assert browser.execute_script("return history.length") == visited
    assert READ_KEY not in _link(browser)
    question = {
        "model": "llama-3.1-8b",
        "max_model_len": 8192,
        "peak_concurrency": 16,
        "kv_cache_dtype": "fp8",
        "engine": "vllm",
        "gpus": ["h100-sxm-80gb"],
    }
    assert _csv(browser) == _plan_csv(keyed_url, question, key=READ_KEY)
    assert _errors(browser) == []


def test_the_traffic_mode_simulates_one_replica_and_draws_latency_against_rate(
    browser: WebDriver, base_url: str
) -> None:
    # Llama-3.1-8B on one H100 at 4 requests/s of 2,000 + 300 tokens (the simulations' tests'
    # deployment): the page shows POST v1/simulations' own percentiles for the same body, and
    # both traffic pictures inline (POST-only pictures), with no browser error.
    _open(browser, base_url)
    browser.find_element(By.CSS_SELECTOR, 'input[name="mode"][value="traffic"]').click()
    assert browser.find_element(By.ID, "submit").text == "Plan and simulate"
    assert not browser.find_element(By.ID, "peak-concurrency").is_displayed()
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-8b")
    Select(browser.find_element(By.ID, "gpu")).select_by_value("h100-sxm-80gb")
    _type(browser, "max-model-len", "8192")
    _type(browser, "request-rate", "4")
    _type(browser, "num-requests", "200")
    browser.find_element(By.ID, "submit").click()
    result = browser.find_element(By.ID, "traffic-result")
    WebDriverWait(browser, 120).until(
        lambda d: result.get_attribute("data-state") in ("ready", "problem")
    )
    assert result.get_attribute("data-state") == "ready", browser.find_element(
        By.ID, "problem"
    ).text
    body = {
        "model": "llama-3.1-8b",
        "gpu": "h100-sxm-80gb",
        "tensor_parallel_size": 1,
        "max_model_len": 8192,
        "kv_cache_dtype": "auto",
        "engine": "vllm",
        "workload": {
            "request_rate": 4,
            "input_tokens": 2000,
            "output_tokens": 300,
            "num_requests": 200,
        },
        "targets": {"max_ttft_ms": 2000, "max_tpot_ms": 50},
    }
    answer = httpx.post(f"{base_url}v1/simulations", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    expected = answer.json()
    for field in ("ttft_ms", "tpot_ms", "e2e_latency_ms", "queue_time_ms"):
        row = browser.find_element(By.CSS_SELECTOR, f'#traffic-latency tr[data-field="{field}"]')
        for cell in row.find_elements(By.CSS_SELECTOR, "td"):
            stat = cell.get_attribute("data-stat") or ""
            assert float(cell.get_attribute("data-value") or "nan") == expected[field][stat]
            assert cell.text == f"{expected[field][stat]:,.1f}"
    figures = _figures(browser)
    assert (
        float(figures["throughput.requests_per_second"][0])
        == (expected["throughput"]["requests_per_second"])
    )
    assert float(figures["goodput.fraction"][0]) == expected["goodput"]["fraction"]
    assert int(figures["preemptions"][0]) == expected["preemptions"]
    # The pictures: the sweep at 1, 2, 4, 6, 8 and 12 requests/s (0.25 to 3 x the rate asked),
    # each point a simulation; the run over time with its three series.
    latency = browser.find_element(By.CSS_SELECTOR, "#picture-latency svg")
    rates = {
        c.get_attribute("data-rate")
        for c in latency.find_elements(By.CSS_SELECTOR, 'circle[data-series="ttft_p99"]')
    }
    assert rates == {"1", "2", "4", "6", "8", "12"}
    (at_four,) = latency.find_elements(
        By.CSS_SELECTOR, 'circle[data-series="ttft_p99"][data-rate="4"]'
    )
    assert float(at_four.get_attribute("data-ms") or "0") == pytest.approx(
        expected["ttft_ms"]["p99"], abs=1e-3
    )
    timeline = browser.find_element(By.CSS_SELECTOR, "#picture-simulation svg")
    series = {
        p.get_attribute("data-series") for p in timeline.find_elements(By.TAG_NAME, "polyline")
    }
    assert series == {"running", "waiting", "kv_usage"}
    assert not browser.find_element(By.ID, "result").is_displayed()
    _screenshot(browser, "traffic.png")
    assert _errors(browser) == []


def test_the_traffic_mode_needs_a_gpu_or_a_target_and_says_so_by_name(
    browser: WebDriver, base_url: str
) -> None:
    # No GPU picked and no target: nothing to plan (a plan for a rate needs a target) and no
    # replica to simulate.
    _open(browser, base_url)
    browser.find_element(By.CSS_SELECTOR, 'input[name="mode"][value="traffic"]').click()
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-8b")
    browser.find_element(By.ID, "max-ttft-ms").clear()
    browser.find_element(By.ID, "max-tpot-ms").clear()
    browser.find_element(By.ID, "submit").click()
    problem = browser.find_element(By.ID, "problem")
    WebDriverWait(browser, 30).until(lambda d: problem.is_displayed())
    assert problem.get_attribute("data-field") == "gpu"
    assert _errors(browser) == []


def _traffic_answer(driver: WebDriver) -> str:
    result = driver.find_element(By.ID, "traffic-result")
    WebDriverWait(driver, 120).until(
        lambda d: result.get_attribute("data-state") in ("ready", "problem")
    )
    return result.get_attribute("data-state") or ""


def _no_policy_violation(driver: WebDriver) -> None:
    """Nothing in the browser's log at all that is an error, and no Content-Security-Policy
    report among the rest (Chromium logs a blocked script, style or fetch as "security")."""
    log = driver.get_log("browser")
    assert [e for e in log if e["level"] == "SEVERE"] == []
    assert [e for e in log if "Content Security Policy" in e["message"]] == []


def _option_cells(row: Any) -> dict[str, tuple[str, str]]:
    return {
        c.get_attribute("data-field") or "": (c.get_attribute("data-value") or "", c.text)
        for c in row.find_elements(By.CSS_SELECTOR, "td[data-field]")
    }


def _money(value: float | None) -> str:
    # as the page writes a cost the API gave: $ and the API's own digits (it rounds to 4)
    return "no price known" if value is None else f"${value:,}"


def test_the_traffic_mode_plans_for_a_rate_priced_per_million_tokens(
    browser: WebDriver, base_url: str
) -> None:
    # The question (issue 23): 20 requests a second, prompts of 2,000 tokens, answers
    # of 300, p99 TTFT under 2 s and p99 TPOT under 50 ms: which GPUs, and what does a million
    # tokens cost? No GPU picked: the whole catalog is searched and no replica is simulated.
    _open(browser, base_url)
    browser.find_element(By.CSS_SELECTOR, 'input[name="mode"][value="traffic"]').click()
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-8b")
    _type(browser, "max-model-len", "8192")
    _type(browser, "request-rate", "20")
    _type(browser, "input-tokens", "2000")
    _type(browser, "output-tokens", "300")
    _type(browser, "num-requests", "300")
    _type(browser, "max-ttft-ms", "2000")
    _type(browser, "max-tpot-ms", "50")
    browser.find_element(By.ID, "submit").click()
    assert _traffic_answer(browser) == "ready", browser.find_element(By.ID, "problem").text
    body = {
        "model": "llama-3.1-8b",
        "max_model_len": 8192,
        "kv_cache_dtype": "auto",
        "engine": "vllm",
        "workload": {
            "request_rate": 20,
            "input_tokens": 2000,
            "output_tokens": 300,
            "num_requests": 300,
        },
        "ttft_p99_ms": 2000,
        "tpot_p99_ms": 50,
        "disaggregated": "auto",
        "explain": False,
    }
    answer = httpx.post(f"{base_url}v1/plans", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    plan = answer.json()
    options = [plan["recommendation"], *plan["alternatives"]]
    rows = browser.find_elements(By.CSS_SELECTOR, "#rate-options tbody tr")
    assert len(rows) == len(options)
    for row, option in zip(rows, options, strict=True):
        cells = _option_cells(row)
        assert row.get_attribute("data-kind") == option["kind"]
        for field in ("cost_per_million_output_tokens_usd", "cost_per_million_input_tokens_usd"):
            assert float(cells[field][0]) == option[field], field
            assert cells[field][1] == _money(option[field]), field
        for field in ("replicas", "total_gpus", "tensor_parallel_size"):
            assert cells[field][0] == str(option[field]), field
        assert float(cells["ttft_ms.p99"][0]) == option["ttft_ms"]["p99"]
        assert float(cells["tpot_ms.p99"][0]) == option["tpot_ms"]["p99"]
        flags = row.find_element(By.TAG_NAME, "pre").get_attribute("textContent") or ""
        split = option["disaggregated"]
        if split is None:
            assert cells["gpu"][1] == option["gpu"]
            assert option["engine_flags"]["vllm"] in flags
        else:
            # both pools: each pool's GPU and flags, and the router in front of them
            pools = (split["prefill_pool"], split["decode_pool"])
            assert cells["gpu"][1] == "prefill {}\ndecode {}".format(*(p["gpu"] for p in pools))
            for pool in pools:
                assert pool["engine_flags"]["vllm"] in flags
            assert split["router"]["vllm"] in flags
    # the recommendation first, and a disaggregated option among those shown (auto weighs both)
    assert rows[0].text.startswith(f"{options[0]['kind']} (recommended)")
    assert "disaggregated" in {o["kind"] for o in options}
    statement = browser.find_element(By.ID, "rate-disaggregation")
    assert statement.text == plan["disaggregation"]["statement"]
    cheaper = float(statement.get_attribute("data-cheaper-fraction") or "nan")
    assert cheaper == plan["disaggregation"]["cheaper_fraction"]
    rejected = browser.find_element(By.ID, "rate-rejected")
    assert rejected.get_attribute("data-value") == str(len(plan["rejected"]))
    warnings = browser.find_element(By.ID, "rate-warnings").text
    assert plan["warnings"][0] in warnings
    # no GPU picked: the plan alone, no replica simulated
    assert not browser.find_element(By.ID, "replica").is_displayed()
    assert not browser.find_element(By.ID, "result").is_displayed()
    _screenshot(browser, "traffic-plan.png")
    _no_policy_violation(browser)


def test_the_traffic_mode_refuses_a_plan_by_the_field_the_api_names(
    browser: WebDriver, base_url: str
) -> None:
    # TensorRT-LLM's scheduler is not simulated: POST v1/plans refuses a rate for it (422,
    # field `engine`), and the page shows that problem as the API wrote it.
    _open(browser, base_url)
    browser.find_element(By.CSS_SELECTOR, 'input[name="mode"][value="traffic"]').click()
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-8b")
    Select(browser.find_element(By.ID, "engine")).select_by_value("trtllm")
    _type(browser, "max-model-len", "8192")
    browser.find_element(By.ID, "submit").click()
    assert _traffic_answer(browser) == "problem"
    problem = browser.find_element(By.ID, "problem")
    assert problem.get_attribute("data-field") == "engine"
    assert problem.text.startswith("engine: ")
    assert "vLLM's or SGLang's" in problem.text
    _only_the_refusals(_errors(browser), 422)


def test_the_traffic_mode_simulates_a_trace_file(browser: WebDriver, base_url: str) -> None:
    # Azure's trace uploaded as a file: posted as text/csv with the deployment in the query
    # string, the page shows POST v1/simulations' own answer for the same file; a plan for a
    # rate is not asked (POST v1/plans takes a workload), and the page says so.
    _open(browser, base_url)
    browser.find_element(By.CSS_SELECTOR, 'input[name="mode"][value="traffic"]').click()
    browser.find_element(By.CSS_SELECTOR, 'input[name="traffic-source"][value="trace"]').click()
    assert not browser.find_element(By.ID, "request-rate").is_displayed()
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-8b")
    Select(browser.find_element(By.ID, "gpu")).select_by_value("h100-sxm-80gb")
    _type(browser, "max-model-len", "8192")
    browser.find_element(By.ID, "trace-file").send_keys(str(AZURE_HEAD))
    browser.find_element(By.ID, "submit").click()
    assert _traffic_answer(browser) == "ready", browser.find_element(By.ID, "problem").text
    query = {
        "model": "llama-3.1-8b",
        "gpu": "h100-sxm-80gb",
        "tensor_parallel_size": 1,
        "max_model_len": 8192,
        "kv_cache_dtype": "auto",
        "engine": "vllm",
        "max_ttft_ms": 2000,
        "max_tpot_ms": 50,
    }
    answer = httpx.post(
        f"{base_url}v1/simulations",
        params=query,
        content=AZURE_HEAD.read_bytes(),
        headers={"Content-Type": "text/csv"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    expected = answer.json()
    assert expected["trace_format"] == "azure"
    for field in ("ttft_ms", "tpot_ms", "e2e_latency_ms"):
        row = browser.find_element(By.CSS_SELECTOR, f'#traffic-latency tr[data-field="{field}"]')
        for cell in row.find_elements(By.CSS_SELECTOR, "td"):
            stat = cell.get_attribute("data-stat") or ""
            assert float(cell.get_attribute("data-value") or "nan") == expected[field][stat]
    assert "azure trace, 40 requests" in browser.find_element(By.ID, "traffic-engine").text
    assert float(_figures(browser)["goodput.fraction"][0]) == expected["goodput"]["fraction"]
    assert not browser.find_element(By.ID, "rate-plan").is_displayed()
    assert "not a trace file" in browser.find_element(By.ID, "rate-plan-none").text
    assert not browser.find_element(By.ID, "traffic-pictures").is_displayed()
    _no_policy_violation(browser)


def _traffic_link(driver: WebDriver) -> str:
    return driver.find_element(By.ID, "traffic-share-link").get_attribute("href") or ""


def _traffic_form(driver: WebDriver) -> dict[str, str]:
    ids = (
        "model", "gpu", "engine", "max-model-len", "kv-cache-dtype", "request-rate",
        "input-tokens", "output-tokens", "num-requests", "max-ttft-ms", "max-tpot-ms",
        "disaggregated", "tensor-parallel-size",
    )  # fmt: skip
    checked = {
        name: driver.find_element(By.CSS_SELECTOR, f'input[name="{name}"]:checked')
        for name in ("mode", "model-source", "traffic-source")
    }
    return {i: driver.find_element(By.ID, i).get_attribute("value") or "" for i in ids} | {
        name: radio.get_attribute("value") or "" for name, radio in checked.items()
    }


def _rate_table(driver: WebDriver) -> list[dict[str, tuple[str, str]]]:
    rows = driver.find_elements(By.CSS_SELECTOR, "#rate-options tbody tr")
    return [_option_cells(row) | {"": (row.get_attribute("data-kind") or "", "")} for row in rows]


def _replica_figures(driver: WebDriver) -> dict[str, Any]:
    cells = driver.find_elements(By.CSS_SELECTOR, "#traffic-latency td")
    return {
        "latency": [(c.get_attribute("data-value"), c.text) for c in cells],
        "figures": _figures(driver),
        "engine": driver.find_element(By.ID, "traffic-engine").text,
    }


def test_the_traffic_modes_link_carries_every_field_and_asks_the_same_question(
    browser: WebDriver, base_url: str
) -> None:
    # Every traffic field away from its default: SGLang on one H100 at 3 requests/s of 1,500 +
    # 200 tokens, 100 requests, fp8 KV, TTFT p99 under 1.5 s and no TPOT target, one pool only.
    _open(browser, base_url)
    browser.find_element(By.CSS_SELECTOR, 'input[name="mode"][value="traffic"]').click()
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-8b")
    Select(browser.find_element(By.ID, "gpu")).select_by_value("h100-sxm-80gb")
    Select(browser.find_element(By.ID, "engine")).select_by_value("sglang")
    Select(browser.find_element(By.ID, "kv-cache-dtype")).select_by_value("fp8")
    Select(browser.find_element(By.ID, "disaggregated")).select_by_value("never")
    for element_id, text in (
        ("max-model-len", "8192"),
        ("request-rate", "3"),
        ("input-tokens", "1500"),
        ("output-tokens", "200"),
        ("num-requests", "100"),
        ("max-ttft-ms", "1500"),
    ):
        _type(browser, element_id, text)
    browser.find_element(By.ID, "max-tpot-ms").clear()
    browser.find_element(By.ID, "submit").click()
    assert _traffic_answer(browser) == "ready", browser.find_element(By.ID, "problem").text
    form, table, replica = _traffic_form(browser), _rate_table(browser), _replica_figures(browser)
    assert table
    assert replica["latency"]
    # The link names each field as the API does: GET v1/plans' (the workload as its JSON
    # text, as GET takes it), `traffic` as POST v1/simulations answers it, and the replica's
    # tensor_parallel_size; the empty TPOT target is left out (none), as is the read key.
    link = _traffic_link(browser)
    assert link.split("#")[0] == base_url
    fields = parse_qs(urlsplit(link).fragment)
    workload = {"request_rate": 3, "input_tokens": 1500, "output_tokens": 200, "num_requests": 100}
    assert {name: values for name, values in fields.items() if name != "workload"} == {
        "model": ["llama-3.1-8b"],
        "traffic": ["workload"],
        "gpus": ["h100-sxm-80gb"],
        "engine": ["sglang"],
        "max_model_len": ["8192"],
        "kv_cache_dtype": ["fp8"],
        "ttft_p99_ms": ["1500"],
        "disaggregated": ["never"],
        "tensor_parallel_size": ["1"],
    }
    assert json.loads(fields["workload"][0]) == workload
    # the plan part of the link is GET v1/plans' query: the same plan as the page's table
    query = {k: v[0] for k, v in fields.items() if k not in ("traffic", "tensor_parallel_size")}
    answer = httpx.get(f"{base_url}v1/plans", params=query, timeout=60)
    assert answer.status_code == 200, answer.text
    plan = answer.json()
    options = [plan["recommendation"], *plan["alternatives"]]
    assert [row["total_gpus"][0] for row in table] == [str(o["total_gpus"]) for o in options]
    # Opened in a fresh page in the plan mode, the link restores the traffic form and asks.
    browser.get("about:blank")
    _open(browser, link)
    assert _traffic_answer(browser) == "ready", browser.find_element(By.ID, "problem").text
    assert _traffic_form(browser) == form
    assert form["mode"] == "traffic"
    assert form["max-tpot-ms"] == ""
    assert _rate_table(browser) == table
    assert _replica_figures(browser) == replica
    assert _traffic_link(browser) == link
    _no_policy_violation(browser)


def test_a_trace_link_restores_the_form_and_asks_for_the_file_by_name(
    browser: WebDriver, base_url: str
) -> None:
    # A trace file cannot go in a link: the page says so beside the link, and opening the link
    # fills the form and names the field it lacks instead of asking.
    _open(browser, base_url)
    browser.find_element(By.CSS_SELECTOR, 'input[name="mode"][value="traffic"]').click()
    browser.find_element(By.CSS_SELECTOR, 'input[name="traffic-source"][value="trace"]').click()
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-8b")
    Select(browser.find_element(By.ID, "gpu")).select_by_value("h100-sxm-80gb")
    _type(browser, "max-model-len", "8192")
    browser.find_element(By.ID, "trace-file").send_keys(str(AZURE_HEAD))
    browser.find_element(By.ID, "submit").click()
    assert _traffic_answer(browser) == "ready", browser.find_element(By.ID, "problem").text
    assert "a file cannot go in a link" in browser.find_element(By.ID, "share-trace").text
    link = _traffic_link(browser)
    fields = parse_qs(urlsplit(link).fragment)
    assert fields["traffic"] == ["trace"]
    assert "workload" not in fields
    browser.get("about:blank")
    _open(browser, link)
    problem = browser.find_element(By.ID, "problem")
    WebDriverWait(browser, 30).until(lambda d: problem.is_displayed())
    assert problem.get_attribute("data-field") == "trace"
    form = _traffic_form(browser)
    assert (form["mode"], form["traffic-source"], form["max-model-len"]) == (
        "traffic",
        "trace",
        "8192",
    )
    assert browser.find_element(By.ID, "traffic-result").get_attribute("data-state") is None
    _no_policy_violation(browser)


def test_a_traffic_link_refuses_a_workload_the_form_cannot_hold_by_name(
    browser: WebDriver, base_url: str
) -> None:
    # Percentile lengths are the API's, not the form's: the page names the field, asks nothing
    workload = '{"request_rate":4,"input_tokens":{"p50":900},"output_tokens":300,"num_requests":9}'
    _open(browser, f"{base_url}#traffic=workload&model=llama-3.1-8b&workload={workload}")
    problem = browser.find_element(By.ID, "problem")
    WebDriverWait(browser, 30).until(lambda d: problem.is_displayed())
    assert problem.get_attribute("data-field") == "workload.input_tokens"
    # a plan's field in a traffic link is named too
    _open(browser, f"{base_url}#traffic=workload&model=llama-3.1-8b&peak_concurrency=64")
    WebDriverWait(browser, 30).until(
        lambda d: problem.get_attribute("data-field") == "peak_concurrency"
    )
    assert browser.find_element(By.ID, "traffic-result").get_attribute("data-state") is None
    assert _errors(browser) == []
