"""English normalization: the rules in the order they are tried (the first that reads a word
wins, so the specific come before the general: an address before its dots are numbers, a phone
number before its groups are, a date or a time before its numbers, a unit's number with it, a
range before its two numbers, a code after everything else that has letters and digits)."""
from model.text.normalize.english.abbreviations import NOT_SENTENCE_ENDS, read_abbreviation
from model.text.normalize.english.codes import read_code
from model.text.normalize.english.dates import read_date
from model.text.normalize.english.digits import read_digits
from model.text.normalize.english.letters import read_acronym
from model.text.normalize.english.money import read_money
from model.text.normalize.english.numbers import read_number
from model.text.normalize.english.phones import read_phone
from model.text.normalize.english.ranges import read_range
from model.text.normalize.english.roman import read_roman
from model.text.normalize.english.symbols import read_symbol
from model.text.normalize.english.times import read_time
from model.text.normalize.english.units import read_unit
from model.text.normalize.english.web import read_address

ENGLISH_RULES = (read_address, read_phone, read_digits, read_money, read_date, read_time, read_range, read_unit,
                 read_roman, read_number, read_code, read_abbreviation, read_acronym, read_symbol)

__all__ = ["ENGLISH_RULES", "NOT_SENTENCE_ENDS"]
