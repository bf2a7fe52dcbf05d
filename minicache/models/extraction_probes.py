"""Extraction probes: ten requests with the variables a model should extract from each.

A fixed, hand-checked set used wherever a model's extraction is measured on this machine: the
real-model test (``tests/models/test_real_models.py``) scores the embedded small model on it and
compares two decoders on the same prompts. Kept in the package so a tool need not import from
``tests/``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EXTRACTION_CASES", "EXTRACT_SYSTEM"]


def num(description: str) -> dict[str, Any]:
    """A JSON-schema number property with the description a model reads."""
    return {"type": "number", "description": description}


#: (request, JSON-schema properties of its variables, the values a correct extraction gives)
EXTRACTION_CASES: list[tuple[str, dict[str, Any], dict[str, float]]] = [
    (
        "What is the current ratio if current assets are $45,000 and current liabilities are $30,000?",
        {
            "current_assets": num("current assets in dollars"),
            "current_liabilities": num("current liabilities in dollars"),
        },
        {"current_assets": 45000, "current_liabilities": 30000},
    ),
    (
        "A loan of $12,000 accrues simple interest at 5% per year for 3 years. How much interest is owed?",
        {
            "principal": num("loan amount in dollars"),
            "rate_percent": num("annual rate as written: 5% -> 5"),
            "years": num("number of years"),
        },
        {"principal": 12000, "rate_percent": 5, "years": 3},
    ),
    (
        "Calculate the future value of $7,500 invested at 4.5% annually for 7 years.",
        {
            "present_value": num("amount invested in dollars"),
            "rate_percent": num("annual rate as written: 4.5% -> 4.5"),
            "years": num("number of years"),
        },
        {"present_value": 7500, "rate_percent": 4.5, "years": 7},
    ),
    (
        "A company has net income of $2.4 million and 800,000 shares outstanding. What is its EPS?",
        {
            "net_income": num("net income in dollars: $2.4 million -> 2400000"),
            "shares": num("shares outstanding"),
        },
        {"net_income": 2400000, "shares": 800000},
    ),
    (
        "Tom has 17 apples and gives 9 to Sara. How many apples does Tom have left?",
        {"apples_before": num("apples Tom has at first"), "apples_given": num("apples given away")},
        {"apples_before": 17, "apples_given": 9},
    ),
    (
        "If revenue is $500,000 and cost of goods sold is $320,000, what is the gross margin?",
        {"revenue": num("revenue in dollars"), "cogs": num("cost of goods sold in dollars")},
        {"revenue": 500000, "cogs": 320000},
    ),
    (
        "A rectangle is 12 meters long and 7 meters wide. What is its area?",
        {"length_m": num("length in meters"), "width_m": num("width in meters")},
        {"length_m": 12, "width_m": 7},
    ),
    (
        "Total debt is $1,250,000 and total equity is $2,500,000. Compute the debt-to-equity ratio.",
        {
            "total_debt": num("total debt in dollars"),
            "total_equity": num("total equity in dollars"),
        },
        {"total_debt": 1250000, "total_equity": 2500000},
    ),
    (
        "A stock bought at $40 is sold at $46 after paying a $2 dividend. What is the holding period return?",
        {
            "buy_price": num("purchase price per share"),
            "sell_price": num("sale price per share"),
            "dividend": num("dividend per share"),
        },
        {"buy_price": 40, "sell_price": 46, "dividend": 2},
    ),
    (
        "A car travels 150 km in 2.5 hours. What is its average speed in km/h?",
        {"distance_km": num("distance in km"), "hours": num("time in hours")},
        {"distance_km": 150, "hours": 2.5},
    ),
]

EXTRACT_SYSTEM = (
    "Extract the variables described by the JSON schema from the user's request. "
    "Copy numbers exactly as the description says. Reply with JSON only."
)
