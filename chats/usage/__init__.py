"""What research costs: each turn's tokens, their price, monthly totals and the limits on them.

- `tokens`: the one reading of `Turn.consumption` (a turn's tokens per model);
- `prices`: the price table (built in, and `MODEL_PRICES`) and pricing a model's tokens;
- `models`: `TurnUsage` (a finished turn's tokens and cost per model, priced when it finished),
  `UsageLimit` (a user's or a team's monthly limits) and `UsageWarning` (the 80% warning);
- `records`: storing a batch of finished turns' usage, in the finish's own transaction;
- `limits`: whose limits apply, and the check every way of starting a turn goes through
  (`chats.services.turn_start_many`);
- `selectors`: the totals the Usage page, the team's view and the admin show.
"""
