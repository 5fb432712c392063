"""Pronunciation lexicons: the case, whole-word and several-word rules, precedence, phoneme runs
left alone, every validation error naming its entry, JSON files, merging, the cost at the
request limit and, as properties, that any text is rewritten without error and text with no
match comes back as it was."""
from __future__ import annotations

import json
import random
import string
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.text.lexicon import MAX_REQUEST_ENTRIES, Lexicon, LexiconError, Pronunciation

TOMATO = "t ə m ˈ ɑ t oʊ"


def say(entries: dict[str, str]) -> Lexicon:
    """A lexicon of say_as entries, word → what it is said as."""
    return Lexicon.of([{"word": word, "say_as": said} for word, said in entries.items()])


@pytest.mark.parametrize("word, text, expected", [
    ("tomato", "tomato Tomato TOMATO toMAto", "X X X X"),
    ("Tomato", "tomato Tomato TOMATO", "tomato X TOMATO"),
    ("US", "US us Us", "X us Us"),
    ("iPhone", "iPhone iphone IPHONE", "X iphone IPHONE"),
    ("c++", "c++ C++", "X X"),
    ("42", "42 420 x42 4.2", "X 420 x42 4.2"),
])
def test_case_rule(word, text, expected):
    assert say({word: "X"}).apply(text, phonemes=True) == expected


def test_exact_case_wins_over_any_case_for_the_same_words():
    lexicon = say({"us": "uss", "US": "you ess"})
    assert lexicon.apply("us US Us", phonemes=True) == "uss you ess uss"


@pytest.mark.parametrize("text, expected", [
    ("cat", "X"),
    ("cat, (cat) [cat] 'cat' cat. cat!", "X, (X) [X] 'X' X. X!"),
    ("catalog bobcat cats cat_1 _cat cat1 1cat", "catalog bobcat cats cat_1 _cat cat1 1cat"),
    ("cat-like über-cat", "X-like über-X"),
    ("écat caté", "écat caté"),
])
def test_whole_words_only(text, expected):
    assert say({"cat": "X"}).apply(text, phonemes=True) == expected


def test_entries_of_several_words_match_any_whitespace():
    lexicon = say({"New York": "Noo Yawk"})
    assert lexicon.apply("New York, New  York,\nNew\tYork", phonemes=True) == "Noo Yawk, Noo Yawk,\nNoo Yawk"
    assert lexicon.apply("NewYork New Yorker new york", phonemes=True) == "NewYork New Yorker new york"
    assert Lexicon.of([{"word": "  New \n York ", "say_as": "X"}]).apply("New York", phonemes=True) == "X"


def test_longer_entries_win_and_later_entries_replace():
    lexicon = say({"new": "gnu", "new york": "Noo Yawk", "york city": "YC"})
    assert lexicon.apply("new york city, new yorker, york city", phonemes=True) == "Noo Yawk city, gnu yorker, YC"
    replaced = Lexicon.of([{"word": "cat", "say_as": "one"}, {"word": "dog", "say_as": "dog"},
                           {"word": "cat", "say_as": "two"}])
    assert replaced.apply("cat dog", phonemes=True) == "two dog"
    assert len(replaced) == 2


def test_phonemes_are_said_as_a_run_or_skipped():
    lexicon = Lexicon.of([{"word": "tomato", "phonemes": f" {TOMATO}\n"}, {"word": "tomato sauce", "say_as": "ketchup"},
                          {"word": "sauce", "say_as": "gravy"}])
    assert lexicon.apply("A tomato, tomato sauce.", phonemes=True) == f"A [[ {TOMATO} ]], ketchup."
    assert lexicon.apply("A tomato, tomato sauce.", phonemes=False) == "A tomato, ketchup."
    assert lexicon.with_phonemes() == (Pronunciation("tomato", phonemes=TOMATO),)
    said_as_text = lexicon.without_phonemes()
    assert len(said_as_text) == 2 and not said_as_text.with_phonemes()
    assert said_as_text.apply("A tomato, tomato sauce.", phonemes=True) == "A tomato, ketchup."


def test_phoneme_runs_are_left_alone():
    lexicon = say({"cat": "X", "ha": "HA"})
    assert lexicon.apply("cat [[ k æ t ]] cat[[cat]]cat", phonemes=True) == "X [[ k æ t ]] X[[cat]]X"
    assert lexicon.apply("[[ ha ]] ha [[ ha ]]", phonemes=True) == "[[ ha ]] HA [[ ha ]]"
    # An unclosed run is text, as the front ends read it.
    assert lexicon.apply("[[ cat cat", phonemes=True) == "[[ X X"
    assert lexicon.apply("]] cat [[", phonemes=True) == "]] X [["


def test_unclosed_runs_cost_linear_time():
    lexicon = say({"cat": "X"})
    for text in ("[[" * 2048, "[[ cat " * 585):
        start = time.perf_counter()
        said = lexicon.apply(text, phonemes=True)
        assert time.perf_counter() - start < 0.01
        assert said == text.replace("cat", "X")


def test_said_text_is_not_read_again():
    assert say({"a": "b", "b": "c"}).apply("a b", phonemes=True) == "b c"


@pytest.mark.parametrize("entries, message", [
    ([{"word": "ok", "say_as": "y"}, {"word": "x"}], "pronunciations[1] ('x'): give phonemes or say_as"),
    ([{"word": "x", "phonemes": "a", "say_as": "b"}], "pronunciations[0] ('x'): give phonemes or say_as, not both"),
    ([{"word": "", "say_as": "y"}], "pronunciations[0] (''): the word is empty"),
    ([{"say_as": "y"}], "pronunciations[0]: the word is empty"),
    ([{"word": "  ", "say_as": "y"}], "pronunciations[0] ('  '): the word is empty"),
    ([{"word": "...", "say_as": "y"}], "pronunciations[0] ('...'): the word holds no letter or digit"),
    ([{"word": "x" * 101, "say_as": "y"}], "the word is over 100 characters"),
    ([{"word": "a[b", "say_as": "y"}], "pronunciations[0] ('a[b'): the word may not hold [ ] < or >"),
    ([{"word": "<b>", "say_as": "y"}], "the word may not hold [ ] < or >"),
    ([{"word": "x", "phonemes": ""}], "pronunciations[0] ('x'): phonemes is empty"),
    ([{"word": "x", "phonemes": "a" * 201}], "phonemes is over 200 characters"),
    ([{"word": "x", "phonemes": "[[ a ]]"}], "phonemes may not hold [ or ]"),
    ([{"word": "x", "say_as": " "}], "pronunciations[0] ('x'): say_as is empty"),
    ([{"word": "x", "say_as": "y" * 301}], "say_as is over 300 characters"),
    ([{"word": "x", "say_as": "[[ a ]]"}], "say_as may not hold [ or ]"),
    ([{"word": "x", "say_as": "y", "ipa": "z", "lang": "en"}], "('x'): unknown key 'ipa', 'lang'; an entry has word"),
    ([{"word": 3, "say_as": "y"}], "pronunciations[0]: word must be a string, not int"),
    ([{"word": "x", "say_as": ["y"]}], "('x'): say_as must be a string, not list"),
    (["tomato"], "pronunciations[0]: an entry is an object with a word and its phonemes or say_as, not str"),
])
def test_validation_names_the_entry(entries, message):
    with pytest.raises(LexiconError) as caught:
        Lexicon.of(entries)
    assert message in str(caught.value)


def test_entry_limit():
    entries = [{"word": f"w{k}", "say_as": "x"} for k in range(MAX_REQUEST_ENTRIES + 1)]
    assert len(Lexicon.of(entries[:-1])) == MAX_REQUEST_ENTRIES
    with pytest.raises(LexiconError, match=r"^pronunciations: more than 1000 entries$"):
        Lexicon.of(entries)
    with pytest.raises(LexiconError, match=r"^request\.pronunciations: more than 3 entries$"):
        Lexicon.of(iter(entries), source="request.pronunciations", limit=3)


def test_read_json_array_and_object(tmp_path):
    array = tmp_path / "array.json"
    array.write_text(json.dumps([{"word": "tomato", "phonemes": TOMATO}, {"word": "SQL", "say_as": "sequel"}]),
                     encoding="utf-8")
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"pronunciations": [{"word": "SQL", "say_as": "S Q L"}]}), encoding="utf-8")
    lexicon = Lexicon.read(array)
    assert len(lexicon) == 2
    assert lexicon.apply("SQL tomato", phonemes=True) == f"sequel [[ {TOMATO} ]]"
    assert Lexicon.read(wrapped).apply("SQL sql", phonemes=True) == "S Q L sql"
    # A file may hold more entries than a request.
    many = tmp_path / "many.json"
    many.write_text(json.dumps([{"word": f"w{k}", "say_as": "x"} for k in range(MAX_REQUEST_ENTRIES + 5)]))
    assert len(Lexicon.read(many)) == MAX_REQUEST_ENTRIES + 5


@pytest.mark.parametrize("content, message", [
    ('[{"word": "x",}]', "bad.json: not a JSON file: Expecting property name enclosed in double quotes: line 1 column 15"),
    ('{"words": []}', "bad.json: must hold an array of pronunciations, or an object whose only key is"),
    ('{"pronunciations": [], "version": 1}', "bad.json: must hold an array"),
    ('"tomato"', "bad.json: must hold an array"),
    ('[{"word": "x", "say_as": "y"}, {"word": "y"}]', "bad.json[1] ('y'): give phonemes or say_as"),
])
def test_read_errors_name_the_file(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(LexiconError) as caught:
        Lexicon.read(path)
    assert str(caught.value).startswith(str(tmp_path)) and message in str(caught.value)


def test_read_errors_name_a_missing_or_undecodable_file(tmp_path):
    with pytest.raises(LexiconError, match="missing.json: cannot read it: No such file or directory"):
        Lexicon.read(tmp_path / "missing.json")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe[]")
    with pytest.raises(LexiconError, match="binary.json: not a JSON file: 'utf-8' codec can't decode"):
        Lexicon.read(binary)


def test_merged_lets_the_other_win():
    server = say({"tomato": "tomahto", "SQL": "sequel", "New York": "Noo Yawk"})
    request = Lexicon.of([{"word": "tomato", "phonemes": TOMATO}, {"word": "New York City", "say_as": "NYC"}])
    merged = server.merged(request)
    assert len(merged) == 4
    assert merged.apply("tomato SQL New York City, New York", phonemes=True) == f"[[ {TOMATO} ]] sequel NYC, Noo Yawk"
    assert merged.with_phonemes() == (Pronunciation("tomato", phonemes=TOMATO),)
    # The two it came from are unchanged.
    assert server.apply("tomato New York City", phonemes=True) == "tomahto Noo Yawk City"
    assert request.apply("SQL", phonemes=True) == "SQL"
    assert request.merged(server).apply("tomato", phonemes=True) == "tomahto"


def test_empty_lexicon():
    assert not Lexicon() and len(Lexicon()) == 0 and not Lexicon.of([])
    assert Lexicon().apply("tomato", phonemes=True) == "tomato"
    assert Lexicon().merged(say({"a": "b"})).apply("a", phonemes=True) == "b"


def test_a_full_request_lexicon_reads_a_long_text_fast():
    rng = random.Random(31)
    words = {"".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 10))) for _ in range(MAX_REQUEST_ENTRIES)}
    entries = [{"word": word + (" city" if k % 10 == 0 else ""), "say_as": "zz"} for k, word in enumerate(words)]
    entries = entries[:MAX_REQUEST_ENTRIES]
    lexicon = Lexicon.of(entries)
    text = " ".join(rng.choice(entries)["word"] if rng.random() < 0.1 else
                    "".join(rng.choices(string.ascii_letters, k=rng.randint(1, 8))) + rng.choice(["", ",", "."])
                    for _ in range(1_000))[:4096]
    lexicon.apply(text, phonemes=True)
    start = time.perf_counter()
    for _ in range(10):
        said = lexicon.apply(text, phonemes=True)
    assert (time.perf_counter() - start) / 10 < 0.005
    assert said.count("zz") > 50


# --- properties ----------------------------------------------------------------------------------

LEXICON = Lexicon.of([
    {"word": "tomato", "phonemes": TOMATO}, {"word": "US", "say_as": "you ess"},
    {"word": "new york", "say_as": "Noo Yawk"}, {"word": "C++", "say_as": "C plus plus"},
    {"word": "ß", "say_as": "ess zet"}, {"word": "İstanbul", "say_as": "Istanbul"},
])


def could_match(text: str) -> bool:
    """Whether some entry of LEXICON is in `text`, whatever the case and the whitespace (what a
    match needs, not what it is)."""
    folded = " ".join(text.split()).lower()
    return any(entry.lower() in folded for entry in ("tomato", "US", "new york", "C++", "ß", "İstanbul"))


@settings(max_examples=300, deadline=None)
@given(st.text(), st.booleans())
def test_any_text_is_rewritten_without_error(text, phonemes):
    said = LEXICON.apply(text, phonemes=phonemes)
    if not could_match(text):
        assert said == text
    if not phonemes:
        assert said.count("[[") == text.count("[[")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="tTuUnNCßẞİ")), st.booleans())
def test_text_without_matches_is_unchanged(text, phonemes):
    assert LEXICON.apply(text, phonemes=phonemes) == text


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["tomato", "Tomato", "US", "us", "new", "york", "New  York", "C++", "[[", "]]",
                                 " ", ",", "x", "\n", "(", "_", "1"]), max_size=20).map("".join))
def test_rewrites_only_whole_matches(text):
    said = LEXICON.apply(text, phonemes=True)
    # No match takes in a neighbouring word character: those the entries do not say are all kept.
    assert [said.count(c) for c in "x1_"] == [text.count(c) for c in "x1_"]
