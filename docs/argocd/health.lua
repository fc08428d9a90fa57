-- Argo CD health check for camelk.dev/OperatorAssignment, the object
-- `reconciler sync` reports its progress on (docs/sync.md, "Status").
--
-- Argo CD sets the global `obj` (the live object) and runs this chunk; it
-- returns {status = ..., message = ...}. Its Lua is gopher-lua (Lua 5.1) and
-- every JSON number reaches it as a float, so the script keeps to Lua 5.1 and
-- formats numbers with %d, never with tostring (Lua 5.4 would print "2.0").
--
-- In order, the first that holds decides:
--   Suspended    the annotation camelk.dev/suspend is "true"
--   Progressing  no status yet, or the reconciler has not reported on
--                metadata.generation yet
--   Degraded     Stalled=True: a gate or a handoff holds the rollout, it was
--                rolled back, or the revision is invalid
--   Suspended    a step waits for `kubectl camelk approve` (rollout state
--                WaitingForApproval): it goes on only when a person acts
--   Progressing  a resume not yet acted on (Suspended=True, annotation gone),
--                Reconciling=True, Ready missing or Unknown, or Ready=True for
--                a revision older than the one being rolled out
--   Healthy      Ready=True (Drifted=True is named in the message)
--   Degraded     Ready=False otherwise (the source cannot be fetched, say)

local SUSPEND_ANNOTATION = "camelk.dev/suspend"

local function condition(status, type_)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == type_ then
      return c
    end
  end
  return nil
end

local function is_true(c)
  return c ~= nil and c.status == "True"
end

local function non_empty(s)
  return s ~= nil and s ~= ""
end

-- A revision as the reconciler prints it: a hexadecimal SHA cut to 12
-- characters, any other id (generation-3) whole.
local function short(revision)
  if revision ~= nil and string.match(revision, "^%x+$") then
    return string.sub(revision, 1, 12)
  end
  return revision
end

-- " (rollout WaitingForHealth, step 2/3)" for a rollout that has not ended.
local function rollout_note(rollout)
  if rollout == nil or not non_empty(rollout.state) or rollout.state == "Complete" then
    return ""
  end
  local note = " (rollout " .. rollout.state
  if rollout.totalSteps ~= nil and rollout.totalSteps > 0
      and rollout.currentStep ~= nil and rollout.currentStep > 0 then
    note = note .. string.format(", step %d/%d", rollout.currentStep, rollout.totalSteps)
  end
  return note .. ")"
end

-- "Reason: message" of a condition, either part left out when empty.
local function said(c)
  if non_empty(c.reason) and non_empty(c.message) then
    return c.reason .. ": " .. c.message
  elseif non_empty(c.message) then
    return c.message
  end
  return c.reason or ""
end

-- What a rollout under way says: its own message (the conditions keep the
-- one of the step's start while its gate waits), else the condition's.
local function progress(rollout, fallback)
  local busy = rollout ~= nil and (rollout.state == "Progressing"
      or rollout.state == "WaitingForHealth" or rollout.state == "Pausing")
  if busy and non_empty(rollout.message) then
    return rollout.message .. rollout_note(rollout)
  end
  return fallback .. rollout_note(rollout)
end

local hs = {}
local metadata = obj.metadata or {}
local annotations = metadata.annotations or {}
local status = obj.status

if annotations[SUSPEND_ANNOTATION] == "true" then
  hs.status = "Suspended"
  local acknowledged = status ~= nil and condition(status, "Suspended")
  if is_true(acknowledged) and non_empty(acknowledged.message) then
    hs.message = acknowledged.message
  else
    hs.message = SUSPEND_ANNOTATION .. " is true: waiting for reconciler sync to acknowledge it"
  end
  return hs
end

if status == nil or status.conditions == nil or #status.conditions == 0 then
  hs.status = "Progressing"
  hs.message = "waiting for reconciler sync to report status"
  return hs
end

local ready = condition(status, "Ready")

-- The newest generation the reconciler reported on. A round that stops
-- before it records status.observedGeneration (an invalid spec) still
-- stamps the generation on the conditions it writes.
local observed = status.observedGeneration
if ready ~= nil and ready.observedGeneration ~= nil
    and (observed == nil or ready.observedGeneration > observed) then
  observed = ready.observedGeneration
end
if metadata.generation ~= nil and (observed == nil or observed < metadata.generation) then
  hs.status = "Progressing"
  if observed == nil then
    hs.message = string.format("waiting for reconciler sync to observe generation %d",
      metadata.generation)
  else
    hs.message = string.format(
      "waiting for reconciler sync to observe generation %d (last observed: %d)",
      metadata.generation, observed)
  end
  return hs
end

local rollout = status.rollout

local stalled = condition(status, "Stalled")
if is_true(stalled) then
  hs.status = "Degraded"
  hs.message = said(stalled) .. rollout_note(rollout)
  return hs
end

if rollout ~= nil and rollout.state == "WaitingForApproval" then
  hs.status = "Suspended"
  hs.message = (rollout.message or "") .. rollout_note(rollout)
  return hs
end

if is_true(condition(status, "Suspended")) then
  hs.status = "Progressing"
  hs.message = SUSPEND_ANNOTATION .. " removed: waiting for reconciler sync to resume"
  return hs
end

local reconciling = condition(status, "Reconciling")
if is_true(reconciling) then
  hs.status = "Progressing"
  hs.message = progress(rollout, reconciling.message or "")
  -- A fetch that failed mid-rollout leaves Reconciling as it was.
  if ready ~= nil and ready.status == "False" and non_empty(ready.reason)
      and ready.reason ~= "Progressing" then
    hs.message = hs.message .. "; " .. said(ready)
  end
  return hs
end

if ready == nil or ready.status == "Unknown" then
  hs.status = "Progressing"
  hs.message = "waiting for reconciler sync to report the Ready condition"
  return hs
end

if ready.status == "True" then
  local attempted = status.lastAttemptedRevision
  if attempted ~= nil and attempted ~= status.lastAppliedRevision then
    -- A new revision whose earlier steps' gate is checked again: the
    -- conditions still describe the revision applied before it.
    hs.status = "Progressing"
    hs.message = progress(rollout, "revision " .. short(attempted) .. " not applied yet")
    return hs
  end
  hs.status = "Healthy"
  hs.message = ready.message or ""
  local drifted = condition(status, "Drifted")
  if is_true(drifted) then
    hs.message = hs.message .. "; Drifted: " .. (drifted.message or "")
  end
  return hs
end

hs.status = "Degraded"
hs.message = said(ready) .. rollout_note(rollout)
return hs
