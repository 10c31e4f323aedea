"""The two-turn conversation every framework recorder (record_<framework>.py) plays.

Turn 1 asks for two things at once: the scripted model requests ``get_weather`` and ``get_time``
in one message (parallel calls). Turn 2 books a table (a nested-object argument and an integer)
and then, in a second model step, converts an amount (a float). Each turn ends with a text
answer. The tools' results are deterministic functions of their arguments, so a recording shows
whether the framework really ran the tool with the arguments the model asked for.

Plain data only: the recorders import this from their own virtualenvs.
"""

from __future__ import annotations

from typing import Any

QUESTION_1 = "What's the weather in Paris and the time in Tokyo?"
QUESTION_2 = "Book a table for 4 at Chez Anne on Friday at 20:00, then convert 42.5 EUR to JPY."
ANSWER_1 = "It is 18C in Paris and 09:00 in Tokyo."
ANSWER_2 = "Booked Chez Anne for 4 on Friday at 20:00; 42.5 EUR is 6885.0 JPY."

WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}
BOOKING = {
    "name": "book_table",
    "args": {
        "booking": {"restaurant": "Chez Anne", "when": {"day": "Friday", "hour": 20}},
        "party_size": 4,
    },
}
CONVERSION = {"name": "convert_currency", "args": {"amount": 42.5, "currency": "JPY"}}

EXPECTED: list[dict[str, Any]] = [WEATHER, TIME, BOOKING, CONVERSION]
# the model's tool-call steps, per turn (each inner list is one assistant message)
TURNS: list[list[list[dict[str, Any]]]] = [[[WEATHER, TIME]], [[BOOKING], [CONVERSION]]]
QUESTIONS = [QUESTION_1, QUESTION_2]
ANSWERS = [ANSWER_1, ANSWER_2]


def get_weather(city: str) -> str:
    return f"18C in {city}"


def get_time(timezone: str) -> str:
    return f"09:00 in {timezone}"


def book_table(booking: dict[str, Any], party_size: int) -> str:
    when = booking["when"]
    return f"booked {booking['restaurant']} for {party_size} on {when['day']} at {when['hour']}:00"


def convert_currency(amount: float, currency: str) -> str:
    return f"{amount * 162.0} {currency}"


DESCRIPTIONS = {
    "get_weather": "Current weather for a city.",
    "get_time": "Local time in a timezone.",
    "book_table": "Book a restaurant table.",
    "convert_currency": "Convert an amount of euros to another currency.",
}
