"""evaluate.account: the cost account. Public face: account.account (the whole account of a
step), claims (the course's claims judged once), packing (packing beyond the account)."""
