"""SSML: each element and attribute read into exact parts, each say-as kind, each refusal (with
what it names), the untrusted-input guards (DOCTYPE, entities, depth, size) and, as properties,
that any text or string reaches the caller as parts or an SsmlError, nothing else."""
from __future__ import annotations

import time
from xml.sax.saxutils import escape

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.text.ssml import SpeechPart, SsmlError, is_ssml, parse_ssml

P = SpeechPart
NS = 'version="1.1" xmlns="http://www.w3.org/2001/10/synthesis" xml:lang="en-US"'


def parts(body: str, phonemes: bool = True) -> list[SpeechPart]:
    return parse_ssml(f"<speak>{body}</speak>", phonemes=phonemes)


def refusal(document: str) -> str:
    with pytest.raises(SsmlError) as caught:
        parse_ssml(document, phonemes=True)
    return str(caught.value)


@pytest.mark.parametrize("text, expected", [
    ("<speak>Hi</speak>", True),
    ("  \n<speak>Hi</speak>", True),
    ("<speak/>", True),
    (f"<speak {NS}>Hi</speak>", True),
    ("<speak\n>Hi</speak>", True),
    ('<?xml version="1.0" encoding="UTF-8"?>\n<speak>Hi</speak>', True),
    ("\ufeff<speak>Hi</speak>", True),
    ("<speaker>Hi</speaker>", False),
    ("<speak", False),
    ("Say <speak>Hi</speak>", False),
    ('<?xml version="1.0"', False),
    ("<p>Hi</p>", False),
    ("", False),
    # What only a document has before its root: parsed (a DOCTYPE refused), never read as text.
    ('<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY x "y">]><speak>&x;</speak>', True),
    ("<!-- a note --><speak>Hi</speak>", True),
])
def test_is_ssml(text, expected):
    assert is_ssml(text) is expected


# --- structure -----------------------------------------------------------------------------------

@pytest.mark.parametrize("body, expected", [
    ("Hello   there,\n world", [P("Hello there, world")]),
    ("Hello <break time=\"500ms\"/> world", [P("Hello", pause_after=0.5), P("world")]),
    ('<break time="1.5s"/>Hello', [P("", pause_after=1.5), P("Hello")]),
    ('Hi<break time="1s"/><break time="2s"/>there', [P("Hi", pause_after=3.0), P("there")]),
    ('Hi <break time="1s"/>  <break strength="weak"/> there', [P("Hi", pause_after=1.25), P("there")]),
    ('Hi<break time="2s"/>', [P("Hi", pause_after=2.0)]),
    ('Hi <break strength="none"/> there', [P("Hi there")]),
    ('Hi <break time="0ms"/> there', [P("Hi there")]),
    ("<s>One</s><s>Two!</s> three", [P("One."), P("Two!"), P("three")]),
    ('<s>He said "no."</s><s>Really,</s>', [P('He said "no."'), P("Really.")]),
    ("<p>One</p><p><s>Two</s><s>Three?</s></p>", [P("One.", pause_after=0.5), P("Two."), P("Three?", pause_after=0.5)]),
    ("Before <p>inside</p> after", [P("Before."), P("inside.", pause_after=0.5), P("after")]),
    ('<s>Wait<break time="1s"/></s>Go', [P("Wait.", pause_after=1.0), P("Go")]),
    ("<p></p><s> </s>Hi", [P("Hi")]),
    ('A <sub alias="World Wide Web">WWW</sub> page', [P("A World Wide Web page")]),
    ('<mark name="here"/>Hi <mark name="there"/>you', [P("Hi you")]),
    ("Tom &amp; Jerry &lt;3 &#233;t&#xE9;", [P("Tom & Jerry <3 été")]),
    ("<![CDATA[a <b> c]]>", [P("a <b> c")]),
    ("Hi <!-- not said --> there", [P("Hi there")]),
])
def test_structure(body, expected):
    assert parts(body) == expected


def test_breaks_only_is_silence():
    assert parts('<break time="2s"/>') == [P("", pause_after=2.0)]


@pytest.mark.parametrize("attributes, seconds", [
    ('time="250ms"', 0.25), ('time="2s"', 2.0), ('time=".5s"', 0.5), ('time="10s"', 10.0),
    ('strength="x-weak"', 0.1), ('strength="weak"', 0.25), ('strength="medium"', 0.5),
    ('strength="strong"', 0.75), ('strength="x-strong"', 1.25), ("", 0.5),
    ('time="3s" strength="weak"', 3.0),
])
def test_break_lengths(attributes, seconds):
    assert parts(f"a<break {attributes}/>b") == [P("a", pause_after=seconds), P("b")]


@pytest.mark.parametrize("attributes, named", [
    ('time="11s"', "'11s'> is over 10 seconds"),
    ('time="-1s"', "'-1s'> is negative"),
    ('time="fast"', "'fast'> is not a duration"),
    ('time="5"', "'5'> is not a duration"),
    ('strength="huge"', "'huge'> is not one of none, x-weak"),
])
def test_break_refusals(attributes, named):
    assert named in refusal(f"<speak>a<break {attributes}/></speak>")


def test_total_pause_is_capped():
    assert "over 60 seconds" in refusal("<speak>" + '<break time="10s"/>' * 7 + "</speak>")
    assert parts('<break time="10s"/>' * 6)[0].pause_after == 60.0


# --- prosody -------------------------------------------------------------------------------------

@pytest.mark.parametrize("rate, expected", [
    ("x-slow", 0.5), ("slow", 0.75), ("medium", 1.0), ("fast", 1.25), ("x-fast", 1.75),
    ("default", 1.0), ("150%", 1.5), ("80%", 0.8), ("1.2", 1.2), ("0.25", 0.25), ("4", 4.0),
])
def test_prosody_rate(rate, expected):
    said = parts(f'Hi <prosody rate="{rate}">there</prosody> you')
    if expected == 1.0:
        assert said == [P("Hi there you")]
    else:
        assert said == [P("Hi"), P("there", rate=expected), P("you")]


def test_nested_rates_multiply_and_same_rates_merge():
    body = ('a <prosody rate="fast">b <prosody rate="200%">c</prosody> <prosody rate="100%">d</prosody>'
            '</prosody> <prosody rate="1">e</prosody>')
    assert parts(body) == [P("a"), P("b", rate=1.25), P("c", rate=2.5), P("d", rate=1.25), P("e")]


def test_prosody_without_text_does_not_cut():
    assert parts('a <prosody rate="slow"> </prosody> b') == [P("a b")]


@pytest.mark.parametrize("body, named", [
    ('<prosody rate="0.2">x</prosody>', "rate='0.2'> makes the rate 0.2; it must be between 0.25 and 4"),
    ('<prosody rate="x-fast"><prosody rate="x-fast"><prosody rate="x-fast">x</prosody></prosody></prosody>',
     "makes the rate 5.35938"),
    ('<prosody rate="quick">x</prosody>', "rate='quick'> is not one of x-slow"),
    ('<prosody rate="nan">x</prosody>', "rate='nan'>"),
    ('<prosody rate="+10%">x</prosody>', "rate='+10%'>"),
    ('<prosody pitch="high">x</prosody>', "<prosody pitch> is not supported"),
    ('<prosody volume="loud">x</prosody>', "<prosody volume> is not supported"),
])
def test_prosody_refusals(body, named):
    assert named in refusal(f"<speak>{body}</speak>")


# --- phoneme -------------------------------------------------------------------------------------

def test_phoneme_with_and_without_phonemes():
    body = 'a <phoneme alphabet="ipa" ph="t ə m\n ˈɑ t oʊ">tomato</phoneme>, b'
    assert parts(body, phonemes=True) == [P("a [[ t ə m ˈɑ t oʊ ]], b")]
    assert parts(body, phonemes=False) == [P("a tomato, b")]
    assert parts('<phoneme ph="h ə">hi</phoneme>', phonemes=True) == [P("[[ h ə ]]")]


@pytest.mark.parametrize("attributes, named", [
    ('alphabet="x-sampa" ph="t@"', "alphabet='x-sampa'> is not supported"),
    ('ph="[[ a ]]"', "may not hold \"[\" or \"]\""),
    ('ph="  "', 'ph=""> is empty'),
    ("", "<phoneme> needs the attribute 'ph'"),
])
def test_phoneme_refusals(attributes, named):
    assert named in refusal(f"<speak><phoneme {attributes}>x</phoneme></speak>")


# --- say-as --------------------------------------------------------------------------------------

@pytest.mark.parametrize("interpret_as, extra, content, said", [
    ("characters", "", "ABC1", "A-B-C one"),
    ("spell-out", "", "abc", "A-B-C"),
    ("verbatim", "", "AB-12 x", "A-B, one two, X"),
    ("cardinal", "", "1,234", "one thousand two hundred thirty-four"),
    ("number", "", "-3.25", "minus three point two five"),
    ("cardinal", "", "+7", "seven"),
    ("ordinal", "", "3", "third"),
    ("ordinal", "", "22nd", "twenty-second"),
    ("ordinal", "", "1,001st", "one thousand first"),
    ("digits", "", "1234", "one two three four"),
    ("digits", "", "0042", "zero zero four two"),
    ("telephone", "", "555-123-4567", "five five five, one two three, four five six seven"),
    ("telephone", "", "+1 (555) 123-4567", "plus one, five five five, one two three, four five six seven"),
    ("date", "", "12/3/2026", "December third, twenty twenty-six"),
    ("date", 'format="mdy"', "Dec. 3rd, 2026", "December third, twenty twenty-six"),
    ("date", 'format="dmy"', "03.12.2026", "December third, twenty twenty-six"),
    ("date", 'format="ymd"', "2026-12-03", "December third, twenty twenty-six"),
    ("date", 'format="dmy"', "3 September 1999", "September third, nineteen ninety-nine"),
    ("date", 'format="md"', "12/3", "December third"),
    ("date", 'format="dm"', "29/2", "February twenty-ninth"),
    ("date", 'format="ym"', "2026-12", "December twenty twenty-six"),
    ("date", 'format="my"', "Sept 2005", "September two thousand five"),
    ("date", 'format="d"', "21", "the twenty-first"),
    ("date", 'format="m"', "jun", "June"),
    ("date", 'format="y"', "1984", "nineteen eighty-four"),
    ("time", "", "3:30pm", "three thirty p-m"),
    ("time", "", "3:30 p.m.", "three thirty p-m"),
    ("time", 'format="hms24"', "15:45", "fifteen forty-five"),
    ("time", 'format="hms24"', "15:45:30", "fifteen forty-five and thirty seconds"),
    ("time", 'format="hms12"', "9 am", "nine a-m"),
    ("time", 'format="hms12"', "3:00", "three o'clock"),
    ("currency", "", "$3.50", "three dollars and fifty cents"),
    ("currency", "", "-£1", "minus one pound"),
    ("currency", "", "USD 3.50", "three US dollars and fifty cents"),
    ("currency", "", "20 EUR", "twenty euros"),
    ("currency", 'format="GBP"', "2.01", "two pounds and one penny"),
    ("currency", 'detail="usd"', "1", "one US dollar"),
    # The whole part is bounded, not the decimals (said digit by digit as any decimals are).
    ("cardinal", "", "999,999,999,999,999.25", "nine hundred ninety-nine trillion nine hundred ninety-nine billion "
     "nine hundred ninety-nine million nine hundred ninety-nine thousand nine hundred ninety-nine point two five"),
    ("cardinal", "", "0.12345678901234567", "zero point one two three four five six seven eight nine zero one two "
     "three four five six seven"),
])
def test_say_as(interpret_as, extra, content, said):
    body = f'On <say-as interpret-as="{interpret_as}" {extra}>{escape(content)}</say-as> now'
    assert parts(body) == [P(f"On {said} now")]


@pytest.mark.parametrize("interpret_as, extra, content, named", [
    ("cardinal", "", "abc", "<say-as interpret-as='cardinal'> cannot read 'abc' as cardinal"),
    ("cardinal", "", "", "cannot read '' as cardinal"),
    ("ordinal", "", "3.5", "cannot read '3.5' as ordinal"),
    ("characters", "", "a@b", "cannot read 'a@b' as characters"),
    ("telephone", "", "555-CALL", "cannot read '555-CALL' as telephone"),
    ("date", "", "13/1/2026", "cannot read '13/1/2026' as date"),
    ("date", "", "2/30/2026", "cannot read '2/30/2026' as date"),
    ("date", "", "2/29/2027", "cannot read '2/29/2027' as date"),
    ("date", 'format="md"', "12/3/2026", "cannot read '12/3/2026' as date"),
    ("date", "", "Ma 3 2026", "cannot read 'Ma 3 2026' as date"),
    ("date", 'format="iso"', "2026-12-03", "format='iso'> is not one of mdy"),
    ("time", "", "25:00", "cannot read '25:00' as time"),
    ("time", 'format="hms12"', "15:45", "cannot read '15:45' as time"),
    ("time", 'format="hms24"', "3:30pm", "cannot read '3:30pm' as time"),
    ("time", 'format="hm"', "3:30", "format='hm'> is not one of hms12, hms24"),
    ("currency", "", "3.50", "names no currency in '3.50'"),
    ("currency", "", "XYZ 3", "has currency 'XYZ'; known: USD"),
    ("currency", "", "$3 USD", "cannot read '$3 USD' as currency"),
    ("color", "", "red", "interpret-as='color'> is not one of characters"),
    # A quantity of 1,001 digits was read digit by digit: 385 s of speech from one element.
    ("cardinal", "", "1" + "0" * 1000, "a number of 1001 digits has no name as a quantity (at most 15)"),
    ("number", "", "1,000,000,000,000,000", "a number of 16 digits has no name"),
    ("ordinal", "", "1" + "0" * 20 + "th", "a number of 21 digits"),
    ("currency", "", "$" + "9" * 16, "a number of 16 digits"),
])
def test_say_as_refusals(interpret_as, extra, content, named):
    assert named in refusal(f'<speak><say-as interpret-as="{interpret_as}" {extra}>{content}</say-as></speak>')


# --- refusals ------------------------------------------------------------------------------------

@pytest.mark.parametrize("element", ["emphasis", "audio", "voice", "lang", "lexicon", "meta", "metadata", "desc"])
def test_unsupported_elements_are_named(element):
    assert f"<{element}> is not supported: " in refusal(f"<speak>Hi <{element}>x</{element}></speak>")


@pytest.mark.parametrize("document, named", [
    ("<speak><bold>x</bold></speak>", "<bold> is not an SSML element Chorus reads"),
    ("<p>Hi</p>", "the root element must be <speak>, not <p>"),
    ("<speak><p><speak>x</speak></p></speak>", "<speak> may only be the root element"),
    ('<speak><s x="1">Hi</s></speak>', "<s> has no attribute 'x'; it takes xml:lang"),
    ('<speak><break time="1s" rate="2"/></speak>', "<break> has no attribute 'rate'"),
    ('<speak foo="bar">Hi</speak>', "<speak> has no attribute 'foo'"),
    ('<speak xmlns:x="urn:x" x:y="1">Hi</speak>', "<speak> has no attribute 'x:y'"),
    ('<speak xmlns:x="urn:x">Hi <x:b/></speak>', "<x:b> is in the namespace 'urn:x', not SSML's"),
    ('<speak xmlns="urn:other">Hi</speak>', "<speak> is in the namespace 'urn:other'"),
    ("<speak>a<sub>b</sub></speak>", "<sub> needs the attribute 'alias'"),
    ("<speak><say-as>1</say-as></speak>", "<say-as> needs the attribute 'interpret-as'"),
    ('<speak><say-as interpret-as="cardinal">1<break/></say-as></speak>', "<say-as> holds text only, not <break>"),
    ('<speak><break time="1s">x</break></speak>', "<break> must be empty, not hold 'x'"),
    ('<speak><break><s>x</s></break></speak>', "<break> holds nothing, not <s>"),
    ("<speak></speak>", "nothing to speak"),
    ("<speak> <p> </p> </speak>", "nothing to speak"),
])
def test_refusals(document, named):
    assert named in refusal(document)


@pytest.mark.parametrize("document, named", [
    ("<speak>a <s>c</speak>", "malformed SSML: mismatched tag (line 1, column 16)"),
    ("<speak>\n  a &nbsp; b</speak>", "malformed SSML: undefined entity (line 2, column 5)"),
    ("<speak>a < b</speak>", "malformed SSML: not well-formed (invalid token) (line 1, column 11)"),
    ("<speak>a</speak> trailing", "malformed SSML: junk after document element (line 1, column 18)"),
    ("", "malformed SSML: no element found"),
    ("just text", "malformed SSML: syntax error"),
    ("<speak>a \x00</speak>", "malformed SSML: not well-formed (invalid token)"),
    ("<speak>\ud800</speak>", "not valid text: surrogates not allowed at character 7"),
])
def test_malformed_documents_name_the_position(document, named):
    assert named in refusal(document)


def test_errors_name_line_and_column():
    assert refusal('<speak>\n  Hi\n  <break time="20s"/></speak>').endswith("(line 3, column 3)")


def test_namespaces_and_declarations_are_read():
    document = (f'<?xml version="1.0" encoding="ISO-8859-1"?>\n<speak {NS} '
                'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="a b">'
                '<p xml:lang="en">Héllo <ssml:break xmlns:ssml="http://www.w3.org/2001/10/synthesis"/> you</p></speak>')
    assert parse_ssml(document, phonemes=False) == [P("Héllo", pause_after=0.5), P("you.", pause_after=0.5)]


# --- untrusted input -----------------------------------------------------------------------------

BILLION_LAUGHS = ('<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
                  + "".join(f' <!ENTITY lol{k} "{("&lol" + str(k - 1) + ";") * 10 if k > 1 else "&lol;" * 10}">\n'
                            for k in range(1, 10))
                  + ']>\n<speak>&lol9;</speak>')


@pytest.mark.parametrize("document", [
    BILLION_LAUGHS,
    '<!DOCTYPE speak SYSTEM "file:///etc/passwd"><speak>x</speak>',
    '<!DOCTYPE speak [<!ENTITY x SYSTEM "file:///etc/passwd">]><speak>&x;</speak>',
    '<!DOCTYPE speak [<!ENTITY % p "x">]><speak>x</speak>',
    "<!DOCTYPE speak><speak>x</speak>",
])
def test_doctypes_are_refused_fast(document):
    start = time.perf_counter()
    assert "a DOCTYPE or entity declaration is not allowed" in refusal(document)
    assert time.perf_counter() - start < 0.1


def test_deep_nesting_is_refused_fast():
    document = "<speak>" + "<prosody>" * 10_000 + "x" + "</prosody>" * 10_000 + "</speak>"
    start = time.perf_counter()
    # <speak> and 31 <prosody> are 32 deep; the next one opens at column 7 + 31 * 9 + 1.
    assert "elements nest more than 32 deep (line 1, column 287)" in refusal(document)
    assert time.perf_counter() - start < 0.1
    assert parts("<prosody>" * 31 + "x" + "</prosody>" * 31) == [P("x")]


def test_a_megabyte_is_read_fast():
    sentences = "<s>Hello there, <sub alias=\"friend\">pal</sub>.</s>" * 20_000
    document = f"<speak>{sentences}</speak>"
    assert len(document) > 1_000_000
    start = time.perf_counter()
    said = parse_ssml(document, phonemes=True)
    assert time.perf_counter() - start < 1.0
    assert len(said) == 20_000 and said[0] == P("Hello there, friend.")
    start = time.perf_counter()
    assert parse_ssml(f"<speak>{'word ' * 200_000}</speak>", phonemes=True)[0].text.count("word") == 200_000
    assert time.perf_counter() - start < 1.0


# --- properties ----------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_escaped_text_is_said_as_itself_or_refused(text):
    try:
        said = parse_ssml(f"<speak>{escape(text)}</speak>", phonemes=True)
    except SsmlError:
        return
    assert said == [P(" ".join(text.split()))]


FRAGMENTS = st.sampled_from([
    "<speak>", "</speak>", "<p>", "</p>", "<s>", "</s>", "<break/>", '<break time="1s"/>', '<break time="x"/>',
    '<prosody rate="fast">', '<prosody rate="300%">', "</prosody>", '<sub alias="a">', "</sub>",
    '<phoneme ph="h i">', "</phoneme>", "<mark name='m'/>", "<emphasis>", "&amp;", "&bogus;", "<!--c-->",
    "<!DOCTYPE x>", '<?xml version="1.0"?>', "<![CDATA[", "]]>", "hello", " ", "\n", "1", "3rd", "Dec", "$",
    *(f'<say-as interpret-as="{kind}">' for kind in ("characters", "cardinal", "ordinal", "telephone", "date",
                                                      "time", "currency", "nonsense")),
    '<say-as interpret-as="date" format="ymd">', '<say-as interpret-as="time" format="hms12">', "</say-as>",
])


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), st.lists(st.one_of(FRAGMENTS, st.text(max_size=5)), max_size=30).map("".join)))
def test_any_string_is_parts_or_an_ssml_error(document):
    try:
        said = parse_ssml(document, phonemes=True)
    except SsmlError:
        return
    assert said and all(isinstance(part, SpeechPart) for part in said)
    assert all(part.text == " ".join(part.text.split()) and (part.text or part.pause_after > 0) for part in said)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["characters", "cardinal", "ordinal", "digits", "telephone", "date", "time", "currency"]),
       st.sampled_from(["", 'format="dmy"', 'format="hms24"', 'format="USD"', 'detail="EUR"']),
       st.text(alphabet="0123456789:/.-, $€£ampAPMDecUSD+()xé", max_size=20))
def test_say_as_content_is_said_or_refused(interpret_as, extra, content):
    try:
        said = parts(f'<say-as interpret-as="{interpret_as}" {extra}>{escape(content)}</say-as>')
    except SsmlError:
        return
    assert len(said) == 1 and said[0].text
