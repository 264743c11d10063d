-- wrk script: POST /v1/entries with a fresh decision each request.
-- The token comes from the environment (LEDGERD_TOKEN); wrk runs one Lua
-- state per thread, so the counter is per thread, offset by a random start.
local token = os.getenv("LEDGERD_TOKEN")
local n = math.random(1, 1000000000)
-- LEDGERD_NOTE_BYTES sets the note's length (default 120), and so the
-- entries' size (bench/disk-wrk.sh).
local note = string.rep("x", tonumber(os.getenv("LEDGERD_NOTE_BYTES") or "120"))

request = function()
  n = n + 1
  local body = string.format(
    '{"principal":"agent-%d","action":"make_payment","decision":"allow","policies":["payments.limit"],' ..
    '"params_digest":"sha256:%064x","params_size":64,' ..
    '"tiers_digest":"sha256:0609cd08e13b2f4b07d5f0e3a86b4f7a4c9cbe2b4b8d4f4f3a4f8d0b3e2c9829",' ..
    '"attributes":{"amount_minor":%d,"currency":"EUR","payee_known":true,"memo_size":%d,' ..
    '"recipient":{"recipient_domain":"example.com"},"route":"/v1/payments/{id}","note":"%s"}}',
    n % 64, n, n, n % 300, note)
  return wrk.format("POST", "/v1/entries",
    {["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json"}, body)
end

response = function(status, headers, body)
  if status ~= 201 then
    io.stderr:write("status " .. status .. ": " .. body .. "\n")
  end
end
