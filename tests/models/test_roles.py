"""The role routes of a run: `[roles]` entries, set_route, and following the config file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from agent_harness.config import load_settings
from agent_harness.errors import ConfigError
from agent_harness.models.client import ModelClient
from agent_harness.models.parking import MemoryParking
from agent_harness.models.roles import RoleBook, route_of
from agent_harness.models.routes import Route, UnknownRole, route_from_spec
from agent_harness.review.verdict import SameVendorRefused
from agent_harness.store.events import RolesChanged

pytestmark = pytest.mark.unit
ENV = {"OPENAI_API_KEY": "sk-a", "ANTHROPIC_API_KEY": "sk-b"}


def book() -> tuple[RoleBook, ModelClient, list[RolesChanged]]:
    heard: list[RolesChanged] = []
    roles = RoleBook(ENV, heard.append)
    client = ModelClient(
        {"reviewer": route_from_spec("openai:gpt-a", ENV)}, env=ENV, parking=MemoryParking()
    )
    roles.add_client(client)
    return roles, client, heard


def test_roles_in_the_config_file_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "agent-harness.toml").write_text(
        '[roles]\nreviewer = "anthropic:claude-x"\n'
        '[roles.planner]\nvendor = "openai"\nmodel = "gpt-p"\nendpoint = "http://127.0.0.1:9/v1"\n'
    )
    roles = load_settings(cwd=tmp_path, env={}).settings.roles
    assert roles["reviewer"] == "anthropic:claude-x"
    planner = route_of("planner", roles["planner"], ENV, "f")
    assert (planner.vendor, planner.model, planner.endpoint, planner.api_key_env) == (
        "openai", "gpt-p", "http://127.0.0.1:9/v1", "OPENAI_API_KEY"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("gpt-4.1", "should look like vendor:model"),
        ({"vendor": "openai"}, "needs vendor and model"),
        ({"vendor": "openai", "model": "m", "colour": "red"}, "unknown key 'colour'"),
        ({"vendor": "acme", "model": "m"}, "give endpoint and api_key_env"),
        (3, 'must be "vendor:model" or a table'),
    ],
)
def test_a_bad_entry_names_the_role_and_what_is_wrong(entry: object, said: str) -> None:
    with pytest.raises(ConfigError, match=said) as caught:
        route_of("reviewer", entry, ENV, "agent-harness.toml")  # type: ignore[arg-type]
    assert "roles.reviewer" in caught.value.message


def test_set_route_swaps_the_clients_map_and_announces_once() -> None:
    roles, client, heard = book()
    before = client.routes
    assert roles.set_route("reviewer", "anthropic:claude-x") == {
        "reviewer": "anthropic:claude-x at https://api.anthropic.com"
    }
    assert client.routes["reviewer"].vendor == "anthropic"
    assert before["reviewer"].vendor == "openai"  # a call holding the old map keeps it
    assert roles.set_route("reviewer", "anthropic:claude-x") == {}  # nothing new: no event
    assert [h.roles for h in heard] == [
        {"reviewer": "anthropic:claude-x at https://api.anthropic.com"}
    ]


def test_a_role_no_client_serves_is_refused() -> None:
    roles, _client, heard = book()
    with pytest.raises(UnknownRole, match="planner"):
        roles.set_route("planner", "openai:gpt-p")
    assert heard == []


def test_the_file_is_followed_and_a_broken_save_changes_nothing(tmp_path: Path) -> None:
    roles, client, heard = book()
    config = tmp_path / "agent-harness.toml"
    config.write_text('[roles]\nreviewer = "openai:gpt-a"\nplanner = "openai:gpt-p"\n')
    roles.watch(config)
    assert roles.refresh() == {}
    config.write_text('[roles]\nreviewer = "anthropic:claude-x"\n[broken\n')
    assert roles.refresh() == {} and roles.problem and "not valid TOML" in roles.problem
    config.write_text('[roles]\nreviewer = "anthropic:claude-x"\nplanner = "openai:gpt-q"\n')
    assert roles.refresh() == {"reviewer": "anthropic:claude-x at https://api.anthropic.com"}
    assert roles.problem is None
    assert client.routes["reviewer"].model == "claude-x"
    assert heard[-1].source == str(config)


def test_a_change_the_run_refuses_changes_nothing(tmp_path: Path) -> None:
    def no_anthropic_reviewer(routes: Mapping[str, Route]) -> None:
        if routes["reviewer"].vendor == "anthropic":
            raise SameVendorRefused("anthropic")

    heard: list[RolesChanged] = []
    roles = RoleBook(ENV, heard.append, no_anthropic_reviewer)
    client = ModelClient(
        {"reviewer": route_from_spec("openai:gpt-a", ENV)}, env=ENV, parking=MemoryParking()
    )
    roles.add_client(client)
    with pytest.raises(SameVendorRefused):
        roles.set_route("reviewer", "anthropic:claude-x")
    config = tmp_path / "agent-harness.toml"
    config.write_text('[roles]\nreviewer = "openai:gpt-a"\n')
    roles.watch(config)
    config.write_text('[roles]\nreviewer = "anthropic:claude-x"\n')
    assert roles.refresh() == {}
    assert roles.problem and "anthropic" in roles.problem
    assert (client.routes["reviewer"].model, heard) == ("gpt-a", [])
