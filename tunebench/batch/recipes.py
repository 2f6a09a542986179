"""The shipped example dataset: cookbook-style recipes with temperatures and durations.

`python -m tunebench.batch.recipes [COUNT] > sweeps/data/recipes.jsonl` regenerates it
(deterministic). Each record: id, title, ingredients (list), directions (list of steps);
some steps name an oven temperature and a duration, as a cookbook JSON would.
"""

from __future__ import annotations

import json
import random
import sys

DISHES = [
    "banana bread",
    "roast chicken",
    "lasagna",
    "apple pie",
    "focaccia",
    "meatloaf",
    "granola",
    "brownies",
    "shepherd's pie",
    "cornbread",
    "baked ziti",
    "scones",
    "roasted vegetables",
    "salmon fillets",
    "quiche",
    "cinnamon rolls",
]
INGREDIENTS = [
    "2 cups flour",
    "1 cup sugar",
    "3 eggs",
    "1/2 cup butter",
    "1 tsp salt",
    "2 tbsp olive oil",
    "1 lb chicken thighs",
    "2 cups milk",
    "1 onion, diced",
    "3 cloves garlic",
    "1 tsp baking soda",
    "2 ripe bananas",
    "1 cup oats",
    "1/2 cup honey",
    "1 lb pasta",
    "2 cups tomato sauce",
    "1 cup cheese",
]
PREP = [
    "Whisk the dry ingredients together in a large bowl.",
    "Cream the butter and sugar until fluffy.",
    "Dice the vegetables evenly.",
    "Season with salt and pepper.",
    "Fold in the remaining ingredients.",
    "Grease a baking dish.",
    "Let the dough rest, covered.",
    "Stir well and set aside.",
]


def recipe(rng: random.Random, number: int) -> dict:
    dish = rng.choice(DISHES)
    steps = rng.sample(PREP, rng.randint(1, 3))
    temperature = rng.choice([325, 350, 375, 400, 425, 450])
    steps.insert(0, f"Preheat the oven to {temperature} degrees F.")
    minutes = rng.choice([10, 15, 20, 25, 30, 35, 40, 45, 60, 75])
    steps.append(f"Bake for {minutes} minutes, until golden.")
    if rng.random() < 0.4:
        rest = rng.choice([5, 10, 15])
        steps.append(f"Cool for {rest} minutes before serving.")
    return {
        "id": f"recipe-{number:04d}",
        "title": dish.title(),
        "ingredients": rng.sample(INGREDIENTS, rng.randint(3, 7)),
        "directions": steps,
    }


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    rng = random.Random(8000)
    for number in range(1, count + 1):
        print(json.dumps(recipe(rng, number)))


if __name__ == "__main__":
    main()
