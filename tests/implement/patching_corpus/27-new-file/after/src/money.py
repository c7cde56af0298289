def cents(amount):
    """Whole cents in an amount of euros."""
    return round(amount * 100)
