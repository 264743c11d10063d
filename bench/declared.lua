-- wrk script: one make_payment call per request, valid for the reference
-- declaration (testdata/declarations/make_payment.json). With
-- LEDGERD_PATH=/v1/decide the ledger decides with its policy set; with
-- /v1/entries (the default) the request carries the mediator's own
-- decision, the one the policies make. Everything else is the same, so
-- the two paths can be compared in one run (bench/decide-wrk.sh). The token comes from LEDGERD_TOKEN;
-- wrk runs one Lua state per thread, so the counter is per thread, offset
-- by a random start.
local token = os.getenv("LEDGERD_TOKEN")
local path = os.getenv("LEDGERD_PATH") or "/v1/entries"
local decide = path == "/v1/decide"
local n = math.random(1, 1000000000)

request = function()
  n = n + 1
  local amount = n % 150000 + 1
  local decision = ""
  if not decide then
    -- The decision the reference policies make (testdata/policies/
    -- payments.cedar): above 1000.00 a person's approval, which opens an
    -- approval in the ledger's state, as the ledger's own decision does.
    if amount > 100000 then
      decision = '"decision":"needs_approval","policies":["payments.approval-above-threshold"],'
    else
      decision = '"decision":"allow","policies":["payments.allow-known-payee"],'
    end
  end
  local body = string.format(
    '{"principal":"agent-%d","action":"make_payment",%s' ..
    '"params_digest":"sha256:%064x","params_size":97,' ..
    '"tiers_digest":"sha256:6f294a5bf29ccd98b4131a675345d1ebbf587c719e1fdb0d9ac8300a8a458589",' ..
    '"attributes":{"amount_minor":%d,"currency":"EUR","payee":{"payee_known":true}}}',
    n % 64, decision, n, amount)
  return wrk.format("POST", path,
    {["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json"}, body)
end

response = function(status, headers, body)
  if status ~= 201 then
    io.stderr:write("status " .. status .. ": " .. body .. "\n")
  end
end
