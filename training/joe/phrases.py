"""Generated sentences for what documentation text lacks: numbers, dates, money, times,
questions and short replies, written the way espeak-ng reads them correctly (it reads "$42" as
"dollar forty two", so money is spelled out in dollars and cents)."""
from __future__ import annotations

import random
from typing import Callable

NAMES = ("Anna", "Ben", "Carlos", "Diana", "Ethan", "Fatima", "Grace", "Hiro", "Isabel", "Jonas",
         "Kate", "Liam", "Maya", "Noah", "Olivia", "Priya", "Quinn", "Rosa", "Sam", "Tom")
PLACES = ("warehouse", "library", "station", "bakery", "office", "garage", "museum", "clinic",
          "school", "harbor", "market", "hotel", "gym", "pharmacy", "airport", "farm")
ITEMS = ("chairs", "boxes", "tickets", "books", "lamps", "bottles", "bikes", "phones", "plates",
         "coats", "maps", "tools", "letters", "candles", "shirts", "keys")
ITEM = ("report", "laptop", "invoice", "umbrella", "recipe", "contract", "camera", "suitcase",
        "guitar", "blanket", "printer", "bicycle", "notebook", "ladder", "kettle", "jacket")
ADJECTIVES = ("heavy", "expensive", "quiet", "bright", "slow", "crowded", "small", "useful")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
OPENERS = ("Yes", "No", "Sure", "Okay", "Of course", "Not yet", "Maybe", "Absolutely", "Well",
           "Alright", "Right", "Thanks", "Great", "Oh", "Hmm", "Certainly")
REPLIES = ("that works for me", "I will do it now", "not today", "let me check", "sounds good",
           "I think so", "give me a minute", "that is fine", "I am not sure", "see you soon",
           "I already did", "please go ahead", "it is done", "I can wait", "good idea",
           "no problem at all", "I will call back later", "thank you so much", "that makes sense",
           "I forgot about that", "we are ready", "it is on the way", "I agree")


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _count(rng: random.Random) -> str:
    n = rng.choice((rng.randint(2, 20), rng.randint(21, 999), rng.randint(1000, 99999)))
    return f"{n:,}" if rng.random() < 0.5 else str(n)


def numbers(rng: random.Random) -> str:
    return rng.choice((
        lambda: f"There are {_count(rng)} {rng.choice(ITEMS)} left in the {rng.choice(PLACES)}.",
        lambda: f"Room {rng.randint(1, 999)} is on the {_ordinal(rng.randint(1, 30))} floor.",
        lambda: f"The score was {rng.randint(0, 9)} to {rng.randint(0, 9)} at halftime.",
        lambda: f"Chapter {rng.randint(1, 40)} starts on page {rng.randint(2, 900)}.",
        lambda: f"About {rng.randint(1, 99)}.{rng.randint(1, 9)} percent of the votes were counted.",
        lambda: f"{rng.choice(NAMES)} ran {rng.randint(1, 42)}.{rng.randint(1, 9)} kilometers today.",
        lambda: f"The code is {' '.join(str(rng.randint(0, 9)) for _ in range(rng.randint(3, 6)))}.",
        lambda: f"We sold {_count(rng)} {rng.choice(ITEMS)} in the {_ordinal(rng.randint(1, 4))} quarter.",
        lambda: f"The {rng.choice(PLACES)} is {rng.randint(2, 95)} miles north of here.",
        lambda: f"Only {rng.randint(2, 60)} out of {rng.randint(61, 500)} people answered the survey.",
    ))()


def dates(rng: random.Random) -> str:
    month, day, year = rng.choice(MONTHS), rng.randint(1, 28), rng.randint(1950, 2035)
    return rng.choice((
        lambda: f"The review is on {rng.choice(WEEKDAYS)}, {month} {_ordinal(day)}.",
        lambda: f"{rng.choice(NAMES)} was born on {month} {day}, {year}.",
        lambda: f"The {rng.choice(ITEM)} is due by {month} {_ordinal(day)}.",
        lambda: f"The {rng.choice(PLACES)} first opened in {year}.",
        lambda: f"We will be away from {month} {day} to {rng.choice(MONTHS)} {rng.randint(1, 28)}.",
        lambda: f"On {month} {_ordinal(day)}, {year}, the bridge was finally finished.",
        lambda: f"Is the party on {rng.choice(WEEKDAYS)} the {_ordinal(day)} or the {_ordinal(day + 1)}?",
        lambda: f"The lease ends in {month} {year}.",
    ))()


def money(rng: random.Random) -> str:
    dollars, cents = rng.choice((rng.randint(1, 99), rng.randint(100, 9999))), rng.randint(1, 99)
    return rng.choice((
        lambda: f"The total comes to {dollars} dollars and {cents} cents.",
        lambda: f"{rng.choice(NAMES)} paid {dollars} dollars for the {rng.choice(ITEM)}.",
        lambda: f"A refund of {dollars} dollars was sent to {rng.choice(NAMES)} yesterday.",
        lambda: f"Each of the {rng.choice(ITEMS)} costs {cents} cents.",
        lambda: f"The {rng.choice(PLACES)} raised {_count(rng)} dollars for the repairs.",
        lambda: f"Rent went up by {rng.randint(20, 400)} dollars a month.",
        lambda: f"That {rng.choice(ITEM)} is only {dollars} dollars and {cents} cents on sale.",
        lambda: f"The budget for next year is {rng.randint(2, 900)} thousand dollars.",
    ))()


def times(rng: random.Random) -> str:
    hour, minute = rng.randint(1, 12), rng.choice((0, 5, 10, 15, 20, 25, 30, 40, 45, 50, 55))
    clock = f"{hour}:{minute:02d} {rng.choice(('am', 'pm'))}"
    return rng.choice((
        lambda: f"The bus to the {rng.choice(PLACES)} leaves at {clock}.",
        lambda: f"Let's meet at {hour} o'clock near the {rng.choice(PLACES)}.",
        lambda: f"The {rng.choice(PLACES)} opens at {hour} in the morning.",
        lambda: f"The call with {rng.choice(NAMES)} is set for {clock} on {rng.choice(WEEKDAYS)}.",
        lambda: f"The repair took {rng.randint(2, 9)} hours and {rng.randint(2, 59)} minutes.",
        lambda: f"Wake me up at {clock}, please.",
        lambda: f"It is a quarter past {hour} and {rng.choice(NAMES)} is still not here.",
        lambda: f"Lunch is served from {hour}:{minute:02d} until {hour % 12 + 1}:{minute:02d}.",
    ))()


def questions(rng: random.Random) -> str:
    name, item, place = rng.choice(NAMES), rng.choice(ITEM), rng.choice(PLACES)
    return rng.choice((
        lambda: f"Could you bring the {item} to the {place}?",
        lambda: f"Where did {name} put the {item}?",
        lambda: f"How long does it take to walk to the {place}?",
        lambda: f"What time does the {place} close on {rng.choice(WEEKDAYS)}?",
        lambda: f"Is the {item} still {rng.choice(ADJECTIVES)}?",
        lambda: f"Why is the {place} so {rng.choice(ADJECTIVES)} today?",
        lambda: f"Have you seen {name} since {rng.choice(WEEKDAYS)}?",
        lambda: f"Which of the {rng.choice(ITEMS)} should {name} keep?",
        lambda: f"Do you know who left the {item} at the {place}?",
        lambda: f"Can {name} borrow your {item} for a while?",
    ))()


def replies(rng: random.Random) -> str:
    opener = rng.choice(OPENERS)
    return rng.choice((
        lambda: f"{opener}.",
        lambda: f"{opener}, {rng.choice(REPLIES)}.",
        lambda: f"{opener}, {rng.choice(REPLIES)}!",
        lambda: f"{rng.choice(REPLIES).capitalize()}, {rng.choice(NAMES)}.",
    ))()


GENERATORS: dict[str, Callable[[random.Random], str]] = {
    "numbers": numbers,
    "dates": dates,
    "money": money,
    "times": times,
    "questions": questions,
    "replies": replies,
}
