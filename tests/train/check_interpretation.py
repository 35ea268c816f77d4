"""Recomputes interpretation.json's numbers from its own per-sample predictions with scikit-learn.

Usage: check_interpretation.py INTERPRETATION.json
Prints one JSON object: what scikit-learn computes ("confusion_matrix", "precision", "recall", "f1",
"support", in class order; "macro_f1", the mean F1 over the classes present or predicted) and the largest difference from the file's values ("max_difference"); the test
compares them.
"""
import json
import sys

from sklearn.metrics import confusion_matrix, f1_score, precision_recall_fscore_support


def main():
    with open(sys.argv[1], encoding="utf-8") as file:
        interpretation = json.load(file)
    labels = list(range(len(interpretation["classes"])))
    actual = [p["actual"] for p in interpretation["predictions"]]
    predicted = [p["predicted"] for p in interpretation["predictions"]]
    matrix = confusion_matrix(actual, predicted, labels=labels)
    normalized = confusion_matrix(actual, predicted, labels=labels, normalize="true")
    precision, recall, f1, support = precision_recall_fscore_support(
        actual, predicted, labels=labels, zero_division=0)
    difference = 0.0
    for row, expected_row in zip(interpretation["confusion_matrix_normalized"], normalized.tolist()):
        difference = max([difference] + [abs(a - b) for a, b in zip(row, expected_row)])
    for name, values in (("precision", precision), ("recall", recall), ("f1", f1)):
        for scores, expected in zip(interpretation["per_class"], values.tolist()):
            difference = max(difference, abs(scores[name] - expected))
    print(json.dumps({
        "confusion_matrix": matrix.tolist(),
        "support": support.tolist(),
        "precision": precision.tolist(),
        "recall": recall.tolist(),
        "f1": f1.tolist(),
        "macro_f1": f1_score(actual, predicted, average="macro"),
        "max_difference": difference,
    }))


if __name__ == "__main__":
    main()
