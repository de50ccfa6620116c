"""The page at `/`, driven in a real headless Chromium (Debian's `chromium` + `chromedriver`).

The test serves kvplan with uvicorn on a loopback port against this session's migrated and
seeded PostgreSQL database (tests/web/server.py adds a Content-Security-Policy that allows
only this origin), fills the form as a person would, and checks the figures the page shows
against the API's own answer to the same question, that both pictures load, and that the
browser logged no error. Screenshots are kept under .artifacts/web/ (git-ignored).

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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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
READ_KEY = "page-key"
# Llama-3.1-8B's config.json, as Hugging Face publishes it (the fields kvplan reads).
LLAMA_CONFIG = {
    "_name_or_path": "meta-llama/Llama-3.1-8B",
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _serving(database_url: str, log: Path, **settings: str) -> Iterator[str]:
    """kvplan served on a loopback port, as `kvplan serve` runs it (uvicorn, the app factory)."""
    port = _free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "KVPLAN_LOG_LEVEL": "WARNING", **settings}
    command = [sys.executable, "-m", "uvicorn", "tests.web.server:create", "--factory"]
    with log.open("wb") as out:
        server = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO,
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
def base_url(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("server") / "uvicorn.log"
    with _serving(database_url, log) as url:
        yield url


@pytest.fixture(scope="module")
def keyed_url(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The same, with reads that need the key `page-key` (KVPLAN_READ_KEYS)."""
    log = tmp_path_factory.mktemp("keyed-server") / "uvicorn.log"
    with _serving(database_url, log, KVPLAN_READ_KEYS=READ_KEY) as url:
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
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


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


def test_a_plan_from_the_catalog_shows_the_apis_figures_and_pictures(
    browser: WebDriver, base_url: str
) -> None:
    _open(browser, base_url)
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-8b")
    _ask(browser, context="8192", peak="100", dtype="fp8", gpu="h100-sxm-80gb")
    assert browser.find_element(By.ID, "result").get_attribute("data-state") == "ready"
    answer = httpx.post(
        f"{base_url}v1/plans",
        json={
            "model": "llama-3.1-8b",
            "max_model_len": 8192,
            "peak_concurrency": 100,
            "kv_cache_dtype": "fp8",
            "engine": "vllm",
            "gpus": ["h100-sxm-80gb"],
        },
    ).json()
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
    formula = answer["explanation"]["concurrency"]["formula"]
    assert formula in explanation
    # fractions keep the digits the API gave (the browser's default, three fraction digits,
    # would show the decode step's 4-decimal milliseconds rounded)
    decode_ms = answer["explanation"]["performance"]["decode_ms_per_token"]
    assert round(decode_ms, 3) != decode_ms
    assert f"{decode_ms:,}" in explanation
    _screenshot(browser, "plan-from-the-catalog.png")
    assert _errors(browser) == []


def test_any_gpu_lets_the_plan_choose(browser: WebDriver, base_url: str) -> None:
    _open(browser, base_url)
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-70b")
    Select(browser.find_element(By.ID, "engine")).select_by_value("sglang")
    _ask(browser, context="32768", peak="64", dtype="fp8")
    answer = httpx.post(
        f"{base_url}v1/plans",
        json={
            "model": "llama-3.1-70b",
            "max_model_len": 32768,
            "peak_concurrency": 64,
            "kv_cache_dtype": "fp8",
            "engine": "sglang",
        },
    ).json()
    _check_against(_figures(browser), answer["recommendation"])
    rows = browser.find_elements(By.CSS_SELECTOR, "#alternatives tbody tr")
    assert len(rows) == min(8, len(answer["alternatives"]))
    assert _errors(browser) == []


def test_a_pasted_config_is_planned_and_drawn(browser: WebDriver, base_url: str) -> None:
    _open(browser, base_url)
    browser.find_element(By.CSS_SELECTOR, 'input[name="model-source"][value="config"]').click()
    assert browser.find_element(By.ID, "model").is_displayed() is False
    browser.find_element(By.ID, "hf-config").send_keys(json.dumps(LLAMA_CONFIG, indent=1))
    _type(browser, "num-parameters", "8030261248")
    _ask(browser, context="16384", peak="32", dtype="auto", gpu="h100-sxm-80gb")
    assert browser.find_element(By.ID, "result").get_attribute("data-state") == "ready"
    answer = httpx.post(
        f"{base_url}v1/plans",
        json={
            "model": {"hf_config": LLAMA_CONFIG, "num_parameters": 8_030_261_248},
            "max_model_len": 16384,
            "peak_concurrency": 32,
            "kv_cache_dtype": "auto",
            "engine": "vllm",
            "gpus": ["h100-sxm-80gb"],
        },
    ).json()
    _check_against(_figures(browser), answer["recommendation"])
    # a pasted model cannot go in a URL: the pictures are POSTed and placed inline as SVG
    svgs = browser.find_elements(By.CSS_SELECTOR, ".picture svg")
    assert len(svgs) == 2
    segments = browser.find_elements(By.CSS_SELECTOR, ".picture svg rect[data-segment]")
    assert {s.get_attribute("data-segment") for s in segments} == {
        "weights",
        "overhead",
        "kv_in_use",
        "headroom",
    }
    _screenshot(browser, "plan-from-a-config.png")
    assert _errors(browser) == []


def test_a_refused_question_shows_the_problem(browser: WebDriver, base_url: str) -> None:
    _open(browser, base_url)
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-8b")
    # DeepSeek's packed sparse-MLA cache, asked for a model without MLA: kvplan refuses (422)
    _ask(browser, context="8192", peak="64", dtype="fp8_ds_mla")
    assert browser.find_element(By.ID, "result").get_attribute("data-state") == "problem"
    problem = browser.find_element(By.ID, "problem")
    assert problem.is_displayed()
    assert problem.get_attribute("data-field") == "kv_cache_dtype"
    assert "use fp8" in problem.text  # the problem's detail, as kvplan wrote it
    # the one error logged is the browser's note of the 422 itself
    errors = _errors(browser)
    assert len(errors) == 1
    assert "422" in errors[0]["message"]


def test_where_reads_need_a_key_the_page_asks_for_it(browser: WebDriver, keyed_url: str) -> None:
    browser.get(keyed_url)
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "problem").is_displayed())
    assert browser.find_element(By.ID, "key-box").get_attribute("open") is not None
    assert "read key" in browser.find_element(By.ID, "problem").text
    # the catalog loads once the key is typed (the change event on leaving the field)
    _type(browser, "api-key", READ_KEY)
    browser.find_element(By.ID, "max-model-len").click()
    WebDriverWait(browser, 30).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-catalog") == "loaded"
    )
    Select(browser.find_element(By.ID, "model")).select_by_value("llama-3.1-8b")
    _ask(browser, context="8192", peak="16", dtype="fp8", gpu="h100-sxm-80gb")
    assert browser.find_element(By.ID, "result").get_attribute("data-state") == "ready"
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script(
            "return [...document.images].every(i => i.complete && i.naturalWidth > 0)"
        )
    )
    for image in browser.find_elements(By.CSS_SELECTOR, ".picture img"):
        assert f"api_key={READ_KEY}" in (image.get_attribute("src") or "")
    # the only errors logged are the browser's notes of the two 401s before the key was typed
    errors = _errors(browser)
    assert errors
    assert all("401" in entry["message"] for entry in errors), errors
