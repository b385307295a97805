"""The simulations' JSON API (tools/sims/api.py): a bad request is an
answer, never an exception."""
import json

import pytest

from tools.sims import api


@pytest.mark.parametrize("request_text, message", [
    ("not json", "not JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('{"sim": "bank", "instance": "x", "method": "new"}', "unknown sim 'bank'"),
    ('{"sim": "race", "instance": "", "method": "new"}', "instance must be"),
    ('{"sim": "race", "instance": "x", "method": "close_connections"}', "unknown method"),
    ('{"sim": "race", "instance": "nobody", "method": "step", "args": [0]}', 'call "new" first'),
    ('{"sim": "race", "instance": "x", "method": "new", "args": {"claim": "clever"}}', "naive"),
    ('{"sim": "race", "instance": "x", "method": "new", "args": {"colour": 1}}', "colour"),
    ('{"sim": "race", "instance": "x", "method": "new", "args": 5}', "args must be"),
])
def test_api_errors_are_answers(instances, request_text, message):
    answer = json.loads(api.call(request_text))
    assert answer["ok"] is False and message in answer["error"]
