"""Every spreadsheet example in README.md, called as that spreadsheet calls it.

Google Sheets `IMPORTDATA` and Excel / LibreOffice `WEBSERVICE` send a GET with the URL alone:
no headers of their own, a read key only as `api_key`, a throwaway parameter to refresh. Power
Query's `Web.Contents` adds its `Query` record to the URL, sends its `Headers`, and POSTs its
`Content`. Tables are read with Python's csv module; a bare value must convert as `VALUE()`
converts it. Sources for how each calls are listed under the README's Spreadsheets section.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlsplit

import pytest
from fastapi.testclient import TestClient

from tests.planning.conftest import KeyedClient

README = Path(__file__).resolve().parents[2] / "README.md"
SHEETS_KEY = "sheets-key"  # the key the README's examples carry
# The user agent Google's fetcher announces; IMPORTDATA sends no other header of its own.
GOOGLE = {"User-Agent": "Mozilla/5.0 (compatible; GoogleDocs; apps-spreadsheets)"}
FORMULA_URL = re.compile(r'(?:IMPORTDATA|WEBSERVICE)\("(https://[^"]+)"\)')


def examples() -> dict[str, list[str]]:
    """The README's Spreadsheets section: each caller's code blocks, by its bold label."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Spreadsheets\n", 1)[1].split("\n## ", 1)[0]
    blocks: dict[str, list[str]] = {}
    for chunk in re.split(r"\n\*\*(?=[A-Z])", section)[1:]:
        label = chunk.split("**", 1)[0]
        blocks[label] = re.findall(r"```text\n(.*?)```", chunk, flags=re.DOTALL)
    return blocks


def urls(label: str) -> list[str]:
    found = [url for block in examples()[label] for url in FORMULA_URL.findall(block)]
    assert found, label
    return found


def target(url: str) -> str:
    """The path and query a URL asks kvplan for (the README's hosts stand for the ingress)."""
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


def value(text: str) -> float:
    """What VALUE() makes of WEBSERVICE's text: one number, nothing around it."""
    assert text == text.strip()
    assert "\n" not in text
    assert '"' not in text
    return float(text)


def table(text: str, delimiter: str = ",") -> list[dict[str, str]]:
    rows = list(csv.DictReader(io.StringIO(text), delimiter=delimiter))
    assert rows
    assert all(None not in row for row in rows)  # no row longer than the header
    return rows


def test_the_readme_has_an_example_per_caller() -> None:
    assert set(examples()) >= {"Google Sheets", "Excel", "LibreOffice Calc", "Power Query"}


@pytest.mark.parametrize("url", urls("Google Sheets"))
def test_google_sheets_importdata(client: TestClient, url: str) -> None:
    response = client.get(target(url), headers=GOOGLE)
    assert response.status_code == 200, response.text
    fmt = dict(parse_qsl(urlsplit(url).query))["format"]
    if fmt == "text":
        assert value(response.text) >= 1
    else:
        assert table(response.text)
    # a throwaway parameter, as a sheet's user adds to fetch again: the same answer
    again = client.get(target(url) + "&_=20260101", headers=GOOGLE)
    assert again.status_code == 200
    assert again.content == response.content


def test_google_sheets_reads_tsv_too(client: TestClient) -> None:
    url = next(u for u in urls("Google Sheets") if "format=csv" in u)
    response = client.get(target(url).replace("format=csv", "format=tsv"), headers=GOOGLE)
    assert table(response.text, "\t")[0]["max_num_seqs"].isdigit()


@pytest.mark.parametrize("label", ["Excel", "LibreOffice Calc"])
def test_webservice_reads_one_value_with_the_key_in_the_url(
    client: TestClient, keyed_client: KeyedClient, label: str
) -> None:
    with keyed_client(SHEETS_KEY) as keyed:
        for url in urls(label):
            path = target(url)
            keyed_path = path if "api_key=" in path else f"{path}&api_key={SHEETS_KEY}"
            response = keyed.get(keyed_path)
            assert response.status_code == 200, response.text
            assert response.headers["content-type"].startswith("text/plain")
            assert value(response.text) >= 1
            # without the key the cell shows #VALUE!: kvplan answers 401, never a number
            bare = path.replace(f"&api_key={SHEETS_KEY}", "")
            assert keyed.get(bare).status_code == 401
            # where no keys are configured, the key in the URL is ignored
            assert client.get(path).text == response.text


def test_excel_builds_the_url_from_cells_with_encodeurl(client: TestClient) -> None:
    (block,) = [b for b in examples()["Excel"] if "ENCODEURL" in b]
    formula = next(line for line in block.splitlines() if "ENCODEURL" in line)
    cells = {"A2": "llama-3.1-8b", "B2": "h100-sxm-80gb", "C2": "8192"}
    # evaluate the concatenation: "text"&ENCODEURL(cell)&"text"&cell...
    parts = re.findall(r'"([^"]*)"|ENCODEURL\((\w+)\)|(?<=&)([A-Z]+\d+)', formula)
    url = "".join(
        text or (quote(cells[encoded], safe="") if encoded else cells[plain])
        for text, encoded, plain in parts
    )
    assert url.startswith("https://")
    assert value(client.get(target(url)).text) >= 1


def _m_record(source: str, name: str) -> dict[str, str]:
    """The text fields of an M record `name = [a = "x", #"B-C" = "y"]` in a Power Query block."""
    match = re.search(rf"{name} = \[([^\]]*)\]", source)
    assert match, name
    pairs = re.findall(r'(?:#"([^"]+)"|(\w+)) = "([^"]*)"', match.group(1))
    return {quoted or plain: text for quoted, plain, text in pairs}


def test_power_query_reads_a_list_as_a_table(keyed_client: KeyedClient) -> None:
    block = next(b for b in examples()["Power Query"] if "Query = [" in b)
    url = re.search(r'Web\.Contents\("([^"]+)"', block)
    assert url
    with keyed_client(SHEETS_KEY) as keyed:
        response = keyed.get(
            urlsplit(url.group(1)).path,
            params=_m_record(block, "Query"),
            headers=_m_record(block, "Headers"),
        )
    rows = table(response.text)  # Csv.Document, then Table.PromoteHeaders
    assert {"slug", "memory_bytes", "memory_gib", "price_usd_per_hour"} <= set(rows[0])


def test_power_query_posts_a_table_of_questions(keyed_client: KeyedClient) -> None:
    block = next(b for b in examples()["Power Query"] if "Content = " in b)
    questions_m = block.split("Questions =", 1)[1].split("Answer =", 1)[0]
    questions = "".join(re.findall(r'"([^"]*)"', questions_m)).replace("#(lf)", "\n")
    url = re.search(r'Web\.Contents\("([^"]+)"', block)
    assert url
    with keyed_client(SHEETS_KEY) as keyed:
        response = keyed.post(
            urlsplit(url.group(1)).path,
            content=questions.encode(),
            headers=_m_record(block, "Headers"),
        )
    assert response.status_code == 200, response.text
    rows = table(response.text)
    asked = list(csv.DictReader(io.StringIO(questions)))
    assert [row["scenario"] for row in rows] == [row["scenario"] for row in asked]
    assert [row["status"] for row in rows] == ["ok"] * len(asked)
