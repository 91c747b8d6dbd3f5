/**
 * The offline responder's manners: greetings, thanks and small talk are answered (not out of domain), the
 * wording fits the channel (a chat is not a call), a question about two things gets both answers, and a
 * misspelled topic word still finds its topic. Unit checks, then the same through the Chat API.
 */
import t from 'tap';
import { createOfflineResponder, swappedLetters, withinOneEdit, type ResponderContext } from '../actors/responder/mod.js';
import { chatProject } from './helpers/chat.js';
import { waitForProjections } from './helpers/projections.js';
import { platformFor } from './helpers/platform.js';
import { openStore } from '../store/mod.js';
import { conversationRecords } from '../actors/conversation/record.js';

const TOPICS = [
  { name: 'Opening hours', content: 'We are open from 9am to 5pm, Monday to Friday.' },
  { name: 'Parking', content: 'Free parking is available behind the building.' },
  { name: 'Thank-you gifts', content: 'Every new customer gets a thank-you voucher.' },
];
const ctx = (over: Partial<ResponderContext> = {}): ResponderContext => ({ behavior: '', topics: TOPICS, variables: {}, history: [], tools: [], ...over });
const r = createOfflineResponder();

t.test('greetings, thanks and small talk are answered, not out of domain', async (t) => {
  for (const [text, intent] of [
    ['Hi there', 'greeting'],
    ['Hello!', 'greeting'],
    ['good morning', 'greeting'],
    ['Thanks!', 'thanks'],
    ['thank you so much', 'thanks'],
    ['How are you?', 'smalltalk:how_are_you'],
    ['are you a bot?', 'smalltalk:identity'],
    ['ok', 'acknowledge'],
  ] as const) {
    const a = await r.respond(ctx(), text);
    t.equal(a.isOod, false, `${text}: not out of domain`);
    t.equal(a.intents[0], intent, `${text}: ${intent}`);
    t.notMatch(a.text, /can't help/, `${text}: answered`);
    t.equal(a.end, false);
  }
  t.same((await r.respond(ctx(), 'thank you')).intents, ['thanks'], 'pure thanks is not the topic that uses the word');
  t.same((await r.respond(ctx(), 'Hi, when do you open?')).intents, ['topic:Opening hours'], 'a greeting with a question gets the answer');
  t.equal((await r.respond(ctx(), 'hi, who won the cup final?')).isOod, false, 'a greeting with an unanswerable question is greeted back');
});

t.test('the wording fits the channel', async (t) => {
  for (const channel of ['CHAT', 'WEBCHAT', 'SMS', 'WHATSAPP', 'API', undefined]) {
    const bye = await r.respond(ctx({ channel }), 'bye');
    t.notMatch(bye.text, /calling/, `${channel}: no "calling" on a text channel`);
    t.match(bye.text, /chatting/);
    t.notMatch((await r.respond(ctx({ channel }), 'I want to talk to a person')).text, /transfer/, `${channel}: no transfer`);
  }
  t.equal((await r.respond(ctx({ channel: 'VOICE-SIP' }), 'bye')).text, 'Thank you for calling. Goodbye!');
  t.match((await r.respond(ctx({ channel: 'VOICE-SIP' }), 'I want to talk to a person')).text, /transfer/);
  t.equal((await r.respond(ctx({ channel: 'CHAT', variables: { goodbye: 'Ciao!' } }), 'bye')).text, 'Ciao!', 'a configured goodbye wins');
});

t.test('a turn without words is asked about, not out of domain, in the channel\'s words', async (t) => {
  for (const [channel, text] of [
    ['VOICE-SIP', "Sorry, I didn't catch that. Are you still there?"],
    ['CHAT', "Sorry, I didn't get a message. What can I help you with?"],
    [undefined, "Sorry, I didn't get a message. What can I help you with?"],
  ] as const) {
    for (const message of ['', '   ']) {
      const a = await r.respond(ctx({ channel }), message);
      t.same([a.text, a.isOod, a.intents], [text, false, ['no_input']], `${channel}: ${JSON.stringify(message)}`);
    }
  }
  t.equal((await r.respond(ctx({ channel: 'VOICE-SIP', variables: { no_input: 'Hello?' } }), '')).text, 'Hello?', 'a configured prompt wins');
});

t.test('an answer combines the topics a question asks about', async (t) => {
  const a = await r.respond(ctx(), 'what time do you open and where do I park?');
  t.same(a.intents, ['topic:Opening hours', 'topic:Parking']);
  t.equal(a.text, `${TOPICS[0].content} ${TOPICS[1].content}`);
  t.same((await r.respond(ctx(), 'When do you open on Monday?')).intents, ['topic:Opening hours'], 'one question, one topic');
  t.same((await r.respond(ctx(), 'Is parking free, and is it behind the building?')).intents, ['topic:Parking'], 'two clauses about one topic');
});

t.test('close misspellings of topic words still match', async (t) => {
  t.same((await r.respond(ctx(), 'is there parkign?')).intents, ['topic:Parking'], 'swap');
  t.same((await r.respond(ctx(), 'when is it openning?')).intents, ['topic:Opening hours'], 'insertion');
  t.same((await r.respond(ctx(), 'is there parkng')).intents, ['topic:Parking'], 'deletion');
  t.same((await r.respond(ctx(), 'do you have a vaucher?')).intents, ['topic:Thank-you gifts'], 'substitution');
  t.same((await r.respond(ctx(), 'when do you opne?')).intents, ['topic:Opening hours'], 'a swap in a short word');
  t.equal((await r.respond(ctx(), 'is the oven warm')).isOod, true, 'other edits of short words are not guessed (oven is not open)');
  t.ok(swappedLetters('opne', 'open') && swappedLetters('prak', 'park'));
  t.notOk(swappedLetters('oven', 'open') || swappedLetters('open', 'open') || swappedLetters('opn', 'open'), 'a swap only');
  t.ok(withinOneEdit('parking', 'parkign') && withinOneEdit('parking', 'parkng') && withinOneEdit('parking', 'parkings'));
  t.ok(withinOneEdit('voucher', 'vaucher'));
  t.notOk(withinOneEdit('parking', 'prakign'), 'two edits');
  t.notOk(withinOneEdit('parking', 'pa'), 'lengths apart');
});

t.test('through the Chat API: "Hi there" opens a chat without an out-of-domain turn, and a chat says goodbye as a chat', async (t) => {
  const p = await platformFor(t);
  const c = await chatProject(p);
  const created = await c.chat('create', { initial_message: 'Hi there' });
  t.equal(created.status, 200, created.text);
  t.notMatch(created.body.response, /can't help/, 'the greeting is answered');
  const id = created.body.conversation_id;
  const both = await c.chat('respond', { conversation_id: id, message: 'What time do you open and where do I park?' });
  t.match(both.body.response, /9am to 5pm/);
  t.match(both.body.response, /parking/);
  const typo = await c.chat('respond', { conversation_id: id, message: 'Is the parkign free?' });
  t.match(typo.body.response, /Free parking/);
  const bye = await c.chat('respond', { conversation_id: id, message: 'bye' });
  t.equal(bye.body.end_conversation, true);
  t.notMatch(bye.body.response, /calling/, 'a chat is not a call');
  await waitForProjections(p);
  const store = await openStore({ dataDir: p.dataDir });
  const rec = (await conversationRecords(store).get(id))!;
  await store.close();
  t.equal(rec.num_ood, 0, 'no out-of-domain turn counted');
  t.same(rec.turns.map((x) => x.intents), [[], ['greeting'], ['topic:Opening hours', 'topic:Parking'], ['topic:Parking'], ['goodbye']]);
});
