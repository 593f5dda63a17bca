"""Weighted phrase rules, matched against the folded form of a cell (lower case, no accents).

A cell is reported when the weights of the distinct rules it matches add up to at least 1.0;
1.5 or more is high severity. Weak rules (< 1.0) describe context that is innocent alone —
"from now on", "Assistant:" at a line start, "send … to x@y" — and only count next to another hint.
Every rule names the stems it needs (GATES); a cell without any is never matched (see gates.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from backend.injection import categories as c

STRONG = 1.5
ALONE = 1.0


@dataclass(frozen=True)
class Rule:
    name: str
    category: str
    weight: float
    regex: re.Pattern[str]


def _alt(*words: str) -> str:
    return "(?:" + "|".join(words) + ")"


# --- vocabulary ------------------------------------------------------------------------------------

AI_STRICT = _alt(
    r"ai",
    r"a\.i\.",
    r"ki",
    r"k\.i\.",
    r"ia",
    r"i\.a\.",
    r"llms?",
    r"(?:large )?language models?",
    r"sprachmodell(?:e)?",
    r"modelos? de lenguaje",
    r"modeles? de langage",
    r"chat ?bots?",
    r"chat ?gpt",
    r"gpt(?:-?[345]\w*)?",
    r"claude",
    r"gemini",
    r"copilot",
    r"co-pilot",
    r"copiloto",
    r"copilote",
    r"ai[ -](?:assistant|agent|model|system|bot)s?",
    r"ki-(?:assistent|agent|modell|system|bot)\w*",
    r"(?:asistente|agente|modelo) (?:de|con) ia",
    r"(?:assistant|agent|modele) (?:ia|d'ia|virtuel)",
    r"virtual assistant",
    r"autonomous agents?",
    r"intelligence artificielle",
    r"inteligencia artificial",
    r"kunstliche intelligenz",
    r"artificial intelligence",
)
AI_GENERIC = _alt(
    r"assistants?", r"assistent(?:in)?", r"asistente", r"agents?", r"agente", r"models?", r"modell",
    r"modelo", r"modele", r"bots?",
)  # fmt: skip
AI_ANY = _alt(AI_STRICT, AI_GENERIC)
# Words that turn "assistant", "agent", "AI" into an ordinary business noun.
NOT_ADDRESS = (
    r"(?!\s*(?:-\s*)?(?:manager|director|team|teams|to\b|coach|editor|controller|accountant|position|role|job|"
    r"hire|hiring|salary|project|budget|vendors?|strategy|initiative|tools?|policy|committee|working|department|"
    r"licen[sc]es?|roadmap|pilot|adoption|training|program|seats?|rollout|roll-out|usage|governance|act\b|"
    r"regulation|ethics|readiness|workshop|webinar|conference|summit|course|de\b|der\b|des\b|del\b|y\b|und\b|"
    r"and\b|or\b|number|id\b|code|portal|name|office|general|principal|professor|agency|fees?|commission))"
)
GREETING = _alt(
    r"hey", r"hi", r"hello", r"dear", r"attention", r"attn:?", r"fao:?", r"ps:?", r"(?:important )?notes? (?:to|for)", r"notice (?:to|for)",
    r"(?:important )?message (?:to|for)", r"instructions? (?:to|for)", r"reminder (?:to|for)", r"memo (?:to|for)",
    r"important for", r"to", r"for", r"p\.? ?s\.? (?:to|for)", r"warning (?:to|for)",
    r"hallo", r"liebe[rs]?", r"an", r"oye", r"oiga", r"achtung", r"hinweis (?:fur|an)", r"nachricht (?:fur|an)",
    r"anweisung(?:en)? (?:fur|an)", r"hola", r"querid[oa]s?", r"estimad[oa]s?", r"atencion",
    r"aviso (?:para|al?)", r"nota (?:para|al?)", r"mensaje (?:para|al?)", r"instrucciones para",
    r"bonjour", r"salut", r"cher", r"chere", r"note (?:pour|a|au)", r"message (?:pour|a|au)",
    r"a l'attention (?:de|du|des)", r"consignes? pour", r"a",
)  # fmt: skip
DET = r"(?:(?:the|any|all|every|dear|our|my|you|die|der|den|das|alle|el|la|los|las|le|l'|les|un|une|cher|chere|toute?s? les?|todos los|todas las)\s*)?"
SENTENCE_START = r"(?:^|[\n.!?;:,>\-–—(\[{\"'][ \t]*+|\s{2})(?:(?:system|urgent|important|priority|admin|security|final|official|special|critical|p\.?s\.?)\s+)?"

YOU_DIRECTIVE = _alt(
    r"you must", r"you should", r"you will", r"you need to", r"you have to", r"you are required",
    r"make sure (?:you|to)", r"be sure to", r"always", r"immediately",
    r"instead", r"important:", r"urgent:", r"du musst", r"sie mussen", r"sofort", r"immer",
    r"debes", r"tienes que", r"siempre", r"inmediatamente", r"tu dois", r"vous devez",
    r"toujours", r"immediatement",
)  # fmt: skip

IGNORE_VERB = _alt(
    r"ignore", r"ignoring", r"disregard", r"forget", r"override", r"overwrite", r"bypass", r"skip",
    r"discard", r"abandon", r"drop", r"dismiss", r"neglect", r"set aside", r"put aside", r"pay no attention to",
    r"do not follow", r"don't follow", r"stop following", r"no longer follow", r"cancel", r"nullify",
    r"ignorier\w*", r"vergiss", r"vergessen sie", r"vergesst", r"missacht\w*", r"uberschreib\w*",
    r"verwirf", r"verwerfen sie", r"ignora\w*", r"ignore[ns]?", r"olvida\w*", r"olvide\w*", r"descarta\w*",
    r"omite", r"omita", r"no (?:sigas|siga|hagas caso(?: a| de)?)", r"haz caso omiso (?:a|de)", r"anula",
    r"ignorez", r"oublie\w*", r"ne (?:tiens|tenez) (?:pas|plus) compte (?:de|des|du)", r"ne suis plus",
    r"ne suivez plus", r"faites abstraction (?:de|des)", r"fais abstraction (?:de|des)", r"outrepasse\w*",
    r"deja(?:r)? de lado", r"haz a un lado", r"pasa por alto", r"remove", r"lass\w*", r"scrap", r"toss", r"ditch",
    r"throw (?:away|out)", r"erase", r"delete", r"clear", r"wipe", r"reset",
)  # fmt: skip
PRIOR = _alt(
    r"previous", r"prior", r"preceding", r"above", r"earlier", r"former", r"original", r"initial",
    r"existing", r"all", r"any", r"your", r"system", r"developer", r"these", r"those", r"old", r"other",
    r"vorherige\w*", r"bisherige\w*", r"obige\w*", r"vorangegangene\w*", r"fruhere\w*", r"alle\w*",
    r"deine\w*", r"ihre\w*", r"ursprunglich\w*", r"anteriores?", r"previas?", r"previos?", r"todas?",
    r"todos", r"tus", r"sus", r"originales?", r"precedentes?", r"anterieure?s?", r"toutes?", r"tous",
    r"tes", r"vos", r"initiales?", r"ta", r"ton", r"votre", r"tu", r"su", r"actuelle?s?", r"current",
)  # fmt: skip
# Nouns that name instructions to a model; POLICY_NOUN names rules people also give each other
# ("ignore the previous travel guidelines"), so an override phrased with them needs one more hint.
STRICT_NOUN = _alt(
    r"instructions?", r"prompts?", r"directions?", r"directives?", r"commands?", r"programming", r"training",
    r"system prompt", r"system messages?", r"guardrails?", r"anweisung\w*", r"instruktion\w*", r"befehl\w*",
    r"system\w*anweisung\w*", r"systemprompt", r"anordnung\w*", r"instrucciones", r"instruccion", r"indicaciones",
    r"comandos", r"consignes?", r"commandes", r"indications", r"ordenes", r"ordres",
)  # fmt: skip
POLICY_NOUN = _alt(
    r"guidelines?", r"guidance", r"constraints?", r"restrictions?", r"rules?", r"safety \w+",
    r"content polic(?:y|ies)", r"regeln", r"vorgaben", r"richtlinien", r"angaben", r"reglas", r"directrices",
    r"pautas", r"restricciones", r"regles",
)  # fmt: skip
INSTRUCTION_NOUN = _alt(
    r"instructions?", r"prompts?", r"directions?", r"directives?", r"guidelines?", r"guidance",
    r"guardrails?", r"constraints?", r"restrictions?", r"rules?", r"commands?", r"programming",
    r"training", r"system prompt", r"system messages?", r"safety \w+", r"content polic(?:y|ies)",
    r"anweisung\w*", r"instruktion\w*", r"befehl\w*", r"system\w*anweisung\w*", r"regeln", r"vorgaben", r"richtlinien", r"angaben",
    r"systemprompt", r"anordnung\w*", r"instrucciones", r"instruccion", r"indicaciones", r"reglas",
    r"directrices", r"pautas", r"ordenes", r"comandos", r"restricciones", r"consignes?", r"regles",
    r"ordres", r"commandes", r"indications", r"directives",
)  # fmt: skip
WEAK_NOUN = _alt(
    r"messages?", r"context", r"conversation", r"assignments?", r"tasks?", r"aufgaben?", r"kontext",
    r"tareas?", r"contexto", r"mensajes", r"taches?", r"contexte",
)  # fmt: skip

SEND_VERB = _alt(
    r"send", r"sending", r"upload", r"uploading", r"e-?mail", r"mail", r"post", r"posting", r"transmit",
    r"forward", r"exfiltrate", r"leak", r"copy", r"export", r"sync", r"share", r"submit", r"dump",
    r"deliver", r"push", r"pipe", r"relay", r"transfer", r"paste", r"include", r"attach", r"write",
    r"sende\w*", r"schick\w*", r"ubermittel\w*", r"ubermittl\w*", r"ubertrag\w*", r"lade", r"laden sie",
    r"hochladen", r"e?-?maile", r"leite", r"leiten sie", r"exportier\w*", r"kopier\w*", r"teile", r"weitergeb\w*",
    r"weiterleit\w*", r"herausgeb\w*",
    r"veroffentlich\w*", r"envia\w*", r"envie\w*", r"manda\w*", r"mande", r"sube", r"suba", r"subir",
    r"transmit[ae]\w*", r"reenvia\w*", r"exporta\w*", r"copia", r"comparte", r"publica", r"filtra",
    r"envoie\w*", r"envoye\w*", r"transmet\w*", r"televers\w*", r"telecharge\w*", r"uploade\w*",
    r"exporte\w*", r"copie\w*", r"partage\w*", r"transfere\w*", r"publie\w*",
)  # fmt: skip
BULK = (
    r"(?:all|every|entire|full|complete|whole|each|raw|alle|samtliche|gesamte\w*|komplette\w*|vollstandige\w*|"
    r"todos|todas|toda|todo|completa|completo|entera|entero|toute?s?|tous|l'ensemble|la totalite|l'integralite)"
    r"(?:\s+(?:of|the|this|these|your|our|de|des|du|la|los|las|el|die|der|den|das|le|les|ses|vos|tes|sus|tus))*"
    r"\s+(?:\w+\s+){0,2}?"
    r"(?:data|dataset|data ?sets?|records?|rows?|tables?|database|db|customer|customers|clients?|contacts?|contact list|kontaktliste|adressliste|"
    r"email addresses|phone numbers|employees?|salar(?:y|ies)|payroll|inputs?|staged|file contents|contents?|"
    r"conversation|chat history|transactions|information|pii|daten|datensatze|kundendaten|kundenliste|kontakte|"
    r"kontaktdaten|tabellen?|zeilen|eintrage|gehalter|gehaltsdaten|lohndaten|inhalte?|datenbank|datos|registros|"
    r"filas|contactos|correos|tabla|base de datos|contenido|salarios|nominas|informacion|donnees|"
    r"enregistrements|lignes|tableau|base de donnees|contenus?|salaires|informations|adresses)"
)
SECRET = (
    r"(?:credentials?|passwords?|passcodes?|api[ _-]?keys?|access keys?|secret keys?|private keys?|ssh keys?|"
    r"(?:access |auth |bearer |session )?tokens?|session cookies|cookies|secrets|environment variables|"
    r"env(?:ironment)? vars?|\.env\b|aws keys?|connection strings?|system prompt|bank (?:details|account numbers)|"
    r"credit card (?:numbers?|details|data)|card numbers|ssns?|social security numbers?|ibans|"
    r"personal data|personally identifiable information|passworter|zugangsdaten|anmeldedaten|"
    r"api-schlussel|kennworter|contrasenas|credenciales|claves(?: de api)?|mots de passe|identifiants|"
    r"cles (?:d'api|api|secretes))"
)
URL = r"(?:https?://|ftp://|www\.)[^\s\"'<>)\]]+"
EMAIL = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
IP = r"\b\d{1,3}(?:\.\d{1,3}){3}\b"
DEST = _alt(
    URL, EMAIL, IP,
    r"(?:my|our|this|that|the following|an? external|the external|a remote|the remote|an? outside|"
    r"a personal|my personal|an attacker'?s?|attacker'?s?) (?:server|endpoint|url|address|e-?mail|inbox|account|"
    r"webhook|domain|host|ip|site|website|bucket|drive|dropbox|gmail|location|api)",
    r"(?:externen?|meinen|diesen|folgenden) (?:server|endpunkt|adresse|webhook)",
    r"(?:mi|este|un) servidor(?: externo)?", r"(?:esta|la siguiente) direccion",
    r"(?:mon|ce|un) serveur(?: externe)?", r"(?:cette|l'adresse) (?:adresse|suivante)",
)  # fmt: skip
TO = r"(?:to|at|into|onto|via|an|nach|auf|zu|a|al|hacia|para|vers|sur|chez)"
NOT_NEGATED = r"(?<!\bnot )(?<!n't )(?<!never )(?<!\bno )(?<!nicht )(?<!nunca )(?<!jamais )(?<!\bpas )"  # "never send passwords by email" is advice, not a request
GAP = r"(?:[^\w.!?;\n]+\w+){0,6}?[^\w.!?;\n]+"  # a few words, not across a sentence end


# --- rules -------------------------------------------------------------------------------------------

_RULES: list[tuple[str, str, float, str]] = [
    # Instructions addressed to an AI.
    (
        "greeting_ai",
        c.ADDRESSED,
        ALONE,
        rf"{SENTENCE_START}{GREETING}\s+{DET}(?:(?:analysis|analytics|reporting|helpdesk|support|sales|finance|hr|data|coding|research) )?{AI_STRICT}\b{NOT_ADDRESS}",
    ),
    (
        "greeting_assistant",
        c.ADDRESSED,
        0.6,
        rf"{SENTENCE_START}{GREETING}\s+{DET}(?:(?:analysis|analytics|sales|helpdesk|support|triage|reporting|code|data|shopping|virtual|"
        rf"research|finance|crm|hr|it|coding|writing) )?{AI_GENERIC}\b{NOT_ADDRESS}",
    ),
    ("vocative_ai", c.ADDRESSED, 0.7, rf"{SENTENCE_START}{DET}{AI_STRICT}\s*(?:[,:!]|\s[-–—]\s)"),
    ("vocative_assistant", c.ADDRESSED, 0.5, rf"{SENTENCE_START}{DET}{AI_GENERIC}\s*[,!]"),
    (
        "if_you_are_ai",
        c.ADDRESSED,
        ALONE,
        r"\b(?:if|when|since|as|because|wenn|falls|da|si|como|puisque|comme) (?:you(?:'re| are)|du|sie|eres|usted es|tu es|vous etes)"
        rf" (?:\w+ ){{0,3}}?(?:an? |the |eine?n? |une? |el |la |l')?(?:{AI_STRICT}|{AI_GENERIC}|automated \w+)\b{NOT_ADDRESS}",
    ),
    (
        "ai_reading_this",
        c.ADDRESSED,
        ALONE,
        rf"\b{AI_STRICT}s?,? (?:that is |who is |which is |that's |die |der |das |que |qui )?(?:\w+ ){{0,2}}?"
        r"(?:reading|processing|parsing|analy[sz]ing|summari[sz]ing|reviewing|ingesting|handling|scanning|seeing|generating|"
        r"writing|producing|running|executing|creating|answering|working on|"
        r"liest|lesen|verarbeitet|verarbeiten|analysiert|analysieren|lee|leen|procesa|procesan|analiza|analizan|"
        r"lit|lisent|traite|traitent|analyse|analysent)\b",
    ),
    (
        "agent_reading_this",
        c.ADDRESSED,
        0.5,
        rf"\b{AI_GENERIC}s?,? (?:that is |who is |which is )?(?:reading|processing|parsing|analy[sz]ing|summari[sz]ing|ingesting|scanning) (?:this|these)",
    ),
    (
        "ai_must",
        c.ADDRESSED,
        0.7,
        rf"\b{AI_STRICT}\s+(?:must|should|shall|has to|needs? to|is (?:required|instructed|expected|supposed) to|will now|is to|"
        r"may not|must not|should not|cannot|can't|muss|soll|sollte|darf|debe|deberia|tiene que|doit|devrait)\b",
    ),
    (
        "when_processing_this",
        c.ADDRESSED,
        0.6,
        r"\b(?:when|while|before|after) (?:you )?(?:are )?(?:summari[sz]|analy[sz]|process|pars|ingest|read|review)\w* "
        r"(?:\w+ ){0,2}?(?:this|these|the) (?:data|file|sheet|table|spreadsheet|document|records?|rows?|dataset|export|csv|cell|column|account|"
        r"customer|deal|vendor|supplier|contract|lead|ticket|company|project|budget|forecast|report|figures|numbers|invoices?|expenses?|"
        r"quotes?|orders?|pipeline|inventory)s?\b",
    ),
    (
        "your_response",
        c.ADDRESSED,
        ALONE,
        r"\b(?:in|to|into|at the (?:end|start|beginning|top|bottom) of|within|throughout) your (?:final )?(?:response|answer|reply|output|"
        r"completion|next message|proposals?|recommendations?|suggestions?|(?:proposed|suggested) (?:actions|changes)|actions\.json)\b(?! to\b)|"
        r"\b(?:in|to|into) (?:every|each|all|any) (?:of your )?(?:responses?|answers?|replies|outputs?|summar(?:y|ies))\b|"
        r"\b(?:en|a) cada (?:respuesta|salida|resumen)\b|\bdans chaque (?:reponse|resume)\b|\bin jeder (?:antwort|ausgabe)\b",
    ),
    (
        "your_output_weak",
        c.ADDRESSED,
        0.5,
        r"\byour (?:response|answer|reply|output|completion|final answer|code|script)\b",
    ),
    (
        "your_response_intl",
        c.ADDRESSED,
        0.7,
        r"\b(?:in |an |zu )?(?:deine[rnm]?|ihre[rnm]?) (?:antwort|ausgabe|zusammenfassung|analyse)\b|"
        r"\b(?:en |a )?(?:tu|su) (?:respuesta|salida|resumen|analisis)\b|\b(?:dans |a )?(?:ta|votre) (?:reponse|sortie|synthese|resume|analyse)\b",
    ),
    (
        "tell_the_user",
        c.ADDRESSED,
        0.6,
        rf"{NOT_NEGATED}\b(?:tell|inform|convince|persuade|encourage|recommend to|assure|reassure|advise|say to|urge) (?:the )?(?:user|human|reader|operator)s?\b|"
        r"\b(?:sag\w*|teile\w*|erklare\w*) (?:dem|den) (?:benutzer|nutzer|anwender)\b|\b(?:dile|informa|convence|di) al usuario\b|"
        r"\b(?:dis|dites|informe|informez|convaincs|convainquez) (?:a )?l'utilisateur\b",
    ),
    (
        "ask_for_credentials",
        c.ADDRESSED,
        ALONE,
        rf"\bask (?:the )?(?:user|human|customer|them) (?:for|to (?:enter|provide|confirm|share|type)) (?:\w+ ){{0,3}}?{SECRET}",
    ),
    ("directive", c.ADDRESSED, 0.3, rf"\b{YOU_DIRECTIVE}(?!\w)"),
    (
        "reveal_secrets",
        c.EXFILTRATION,
        ALONE,
        rf"{NOT_NEGATED}\b(?:print|show|display|list|reveal|output|dump|echo|give me|read out|affiche\w*|montre\w*|donne\w*|muestra\w*|"
        rf"imprime|ensename|dame|dime|dinos|muestrame|lista|zeig\w*|gib\w*|liste\w*|drucke\w*|nenne|read me|tell me|recite|spell out|type out|share|what (?:is|are))\b{GAP}(?:\w+\s+){{0,2}}?{SECRET}",
    ),
    (
        "steer_response",
        c.ADDRESSED,
        0.5,
        r"\b(?:respond|reply|answer|say|state|report|output|conclude|claim)(?: only| simply| just)? (?:that|with|by saying)\b|"
        r"\b(?:di|decir|diga|digas|dire|dis|dites|sag|sage|sagen) (?:que|qu'|dass)|\bsay (?:it|this|they) (?:is|are|was|were|has|have)\b|"
        r"\bmust (?:start|begin|end) with\b|"
        r"\bantworte\w* (?:nur |einfach )?(?:mit|dass)\b|\bresponde\w* (?:solo |solamente |unicamente )?(?:con|que)\b|"
        r"\brepond\w* (?:uniquement |seulement |simplement )?(?:par|que)\b|\bnothing else\b|\bnichts anderes\b|\bnada mas\b|\brien d'autre\b",
    ),
    (
        "bulk_tamper",
        c.ADDRESSED,
        0.5,
        r"\b(?:mark|set|flag|change|update|delete|remove|drop|approve|reject|zero|overwrite|round|replace|multiply|divide|adjust|inflate|reduce|alter|modify)\w* (?:all|every|each|any) (?:\w+ ){0,2}?"
        r"(?:invoices?|rows?|records?|deals?|tickets?|expenses?|payments?|amounts?|entries|lines|levels|quantities|prices|stock|values|balances|totals|statuses|"
        r"timesheets?|requests?|orders?|opportunit(?:y|ies)|leads?|accounts?|contacts?|items?|claims?|refunds?)\b|"
        r"\b(?:markiere|losche|andere)\w* (?:alle|jede|samtliche)\b|\b(?:marca|borra|elimina|cambia)\w* (?:todas|todos)\b|"
        r"\b(?:marque|supprime|efface|modifie|approuve|valide)\w* (?:toutes|tous)\b",
    ),
    (
        "unrestricted",
        c.OVERRIDE,
        0.5,
        r"\b(?:unrestricted|unfiltered|uncensored|without (?:any )?(?:restrictions|limits|limitations|filters|rules|guardrails)|"
        r"no (?:restrictions|limits|filters|rules|guardrails)|ohne (?:einschrankungen|grenzen|filter)|sin (?:restricciones|limites|filtros)|"
        r"sans (?:restrictions|limites|filtres))\b",
    ),
    (
        "i_want_you_to",
        c.ADDRESSED,
        0.8,
        r"\bi (?:want|need) you to (?:act|pretend|be|ignore|forget|only|always|respond|answer|write|tell|say|print|output|list|reveal|show|send|email|upload)\b",
    ),
    # Attempts to replace the assistant's instructions.
    (
        "ignore_instructions",
        c.OVERRIDE,
        STRONG,
        rf"\b{IGNORE_VERB}\s+(?:\S+\s+){{0,5}}?{PRIOR}\s+(?:\S+\s+){{0,3}}?{STRICT_NOUN}\b",
    ),
    (
        "ignore_policies",
        c.OVERRIDE,
        0.8,
        rf"\b{IGNORE_VERB}\s+(?:\S+\s+){{0,5}}?{PRIOR}\s+(?:\S+\s+){{0,3}}?{POLICY_NOUN}\b",
    ),
    (
        "ignore_instructions_bare",
        c.OVERRIDE,
        ALONE,
        rf"\b{IGNORE_VERB}\s+(?:the |die |las |los |les |tes |vos |las |sus |tus )?(?:user'?s? |users' |customer'?s? |human'?s? |nutzer\w* |usuario\w* |utilisateur\w* )?{STRICT_NOUN}\b",
    ),
    (
        "ignore_policies_bare",
        c.OVERRIDE,
        0.6,
        rf"\b{IGNORE_VERB}\s+(?:the |die |las |los |les |tes |vos |las |sus |tus )?{POLICY_NOUN}\b",
    ),
    (
        "ignore_context",
        c.OVERRIDE,
        0.8,
        rf"\b{IGNORE_VERB}\s+(?:\S+\s+){{0,4}}?{PRIOR}\s+(?:\S+\s+){{0,2}}?{WEAK_NOUN}\b",
    ),
    (
        "ignore_everything_above",
        c.OVERRIDE,
        STRONG,
        r"\b(?:ignore|disregard|forget)(?: about)? (?:all |everything |anything |the text |the |all the |what(?:ever)? (?:was|is|you were) (?:said|written|told) )?"
        r"(?:above|before|previously|prior|earlier|so far|you(?:'ve| have) been told|i (?:said|told you)|that came before|foregoing|preceding)\b"
        r"(?=\s*(?:[.!,;:)\-–—]|$|(?:and|then|now|that|this|it|instructions?|prompts?|messages?|text|context|rules|directions|guidance|commands?|conversation|input)\b))|"
        r"\b(?:ignore|disregard|forget)(?: about)? (?:all|everything)(?: (?:of )?(?:that|this))?(?:[.!,;]|\s+and\b|\s+now\b|$)|"
        r"\b(?:vergiss|vergessen sie|ignoriere|ignorieren sie) alles(?: \w+){0,3}? ?(?:davor|zuvor|vorher|bisher\w*|oben|gesagte\w*|[.!,]|$)|"
        r"\b(?:olvida|olvide|ignora|ignore) todo(?: lo)?(?: \w+){0,3}? ?(?:anterior|dicho|antes|arriba|previo|[.!,]|$)|"
        r"\b(?:oublie|oubliez|ignore|ignorez) tout(?: ce)?(?: \w+){0,3}? ?(?:precede|avant|dessus|dit|[.!,]|$)",
    ),
    (
        "from_now_on",
        c.OVERRIDE,
        0.5,
        r"\b(?:from now on|from this point (?:on|forward)|henceforth|going forward|ab sofort|ab jetzt|von nun an|"
        r"a partir de ahora|de ahora en adelante|desde ahora|a partir de maintenant|desormais|dorenavant)\b",
    ),
    (
        "from_now_on_you",
        c.OVERRIDE,
        ALONE,
        r"\b(?:from now on|from this point (?:on|forward)|henceforth|ab sofort|ab jetzt|von nun an|a partir de ahora|"
        r"de ahora en adelante|a partir de maintenant|desormais|dorenavant),? (?:\w+ )?(?:you are|you're|you will be|you act|"
        r"respond|answer|reply only|reply with|act as|behave|pretend|output|ignore|refuse|speak|talk|only (?:respond|answer|reply|output)|"
        r"bist du|du bist|antworte\w*|ignoriere\w*|verhalte\w*|handle als|agiere\w*|eres|seras|responde\w*|actua\w*|ignora\w*|"
        r"tu es|vous etes|tu seras|reponds|repondez|agis|agissez|comporte)\b",
    ),
    (
        "before_the_task",
        c.OVERRIDE,
        ALONE,
        r"\bbefore (?:you )?(?:solv|answer|respond|repl|complet|start|begin|do|perform|continu|proceed|run|execut|writ|analy[sz]|"
        r"process|summari[sz]|finish|tackl|work|handl|generat|return|output|think|address)\w* (?:on |with )?(?:\w+ ){0,2}?"
        r"(?:the |this |that |your |any |my |their )?(?:task|question|request|query|prompt|assignment|user'?s?|problem|analysis|code|anything|export|dataset|data|file|sheet|spreadsheet)\b|"
        r"\bbevor (?:du|sie) (?:\w+ ){0,2}?(?:die |diese |deine |ihre )?(?:aufgabe|frage|anfrage|analyse)\b|"
        r"\bantes de (?:resolver|responder|contestar|completar|realizar|hacer|empezar|comenzar|continuar|ejecutar|analizar|procesar|resumir)"
        r" (?:la |tu |su |esta |cualquier |el )?(?:tarea|pregunta|consulta|solicitud|peticion|analisis|codigo)\b|"
        r"\bavant de (?:resoudre|repondre|traiter|completer|realiser|faire|commencer|continuer|executer|analyser|resumer)"
        r" (?:a )?(?:la |ta |votre |cette |cet |le |l')?(?:tache|question|demande|requete|analyse|code)\b",
    ),
    (
        "new_instructions",
        c.OVERRIDE,
        0.8,
        r"\b(?:new|updated|revised|real|actual|true|hidden|secret|additional|priority|override|overriding|urgent) "
        r"(?:system )?(?:instructions?|prompt|directives?|objective|orders)\b|\bneue (?:anweisung\w*|instruktion\w*|aufgabe)\b|"
        r"\bnuevas? (?:instrucciones|tarea)\b|\bnouvelles? (?:instructions?|consignes?|tache)\b",
    ),
    (
        "your_real_task",
        c.OVERRIDE,
        ALONE,
        r"\byour (?:real|actual|true|new|only|primary|main|updated|sole|next) (?:task|goal|objective|instructions?|job|mission|purpose|directive|priority)\b"
        r"(?!\s+(?:list|lists|board|queue|tracker|tool|app|manager|owner|assignments?|is (?:in|on|at|attached)|are (?:in|on|at|attached)|for|can be found)\b)|"
        r"\byour (?:task|goal|instructions|job|role|purpose|objective|mission) (?:has|have) (?:changed|been (?:changed|updated|replaced))\b|"
        r"\bthe (?:real|actual|true) (?:task|goal|objective|instructions?)\b|"
        r"\b(?:focus|concentrate) on (?:your|the|a) new task\b|\b(?:deine|ihre) (?:neue|eigentliche|wahre|einzige) (?:aufgabe|anweisung)\b|"
        r"\b(?:tu|su) (?:verdadera|nueva|unica|autentica) (?:tarea|mision|instruccion)\b|\b(?:ta|votre) (?:vraie|nouvelle|seule|veritable) (?:tache|mission)\b",
    ),
    (
        "you_are_now",
        c.OVERRIDE,
        ALONE,
        rf"\byou are now (?:an? |the |in |no longer |free|unrestricted|unfiltered|jailbroken|dan\b|{AI_STRICT}\b)|"
        r"\b(?:du bist|sie sind) (?:jetzt|nun|ab sofort) (?:ein|eine|der|die|im|kein)\b|\b(?:ahora )?eres ahora (?:un|una|el|la)\b|"
        r"\b(?:tu es|vous etes) (?:maintenant|desormais) (?:un|une|le|la)\b",
    ),
    (
        "act_as",
        c.OVERRIDE,
        0.8,
        r"\b(?:act|behave|respond|answer) as (?:if you (?:were|are) )?(?:an? |the )?(?:unrestricted|unfiltered|jailbroken|evil|malicious|"
        r"different|new|root|admin|administrator|system|sysadmin|hacker|dan\b|developer mode)|\bpretend (?:to be|you are|that you are|you're)\b|"
        r"\brole-?play as\b|\bi want you to act as\b|\bact as if you (?:have|had|were|are|could)\b|\b(?:fais|faites) (?:comme si (?:tu etais|vous etiez)|semblant d'etre)\b|\btu joues le role\b|"
        r"\bhaz como si (?:fueras|eras)\b|\bfinge (?:que eres|ser)\b|\bactua como (?:si|un|una)\b|\btu so,? als (?:ob|waerst|warst)\b|\bspiel\w* die rolle\b|"
        r"\b(?:now you are|you are now|eres ahora|ahora eres|du bist jetzt|jetzt bist du|tu es maintenant|maintenant tu es) (?!\w+ed\b|\w+ing\b)",
    ),
    (
        "jailbreak",
        c.OVERRIDE,
        0.8,
        r"\b(?:jailbreak\w*|jail-break\w*|dan mode|do anything now|god mode|sudo mode|prompt injection)\b",
    ),
    ("developer_mode", c.OVERRIDE, 0.8, r"\bdeveloper mode\b"),
    (
        "reveal_prompt",
        c.OVERRIDE,
        ALONE,
        r"\b(?:reveal|print|show|output|repeat|display|leak|share|tell me|give me|write out|dump|return|list|send)(?: me)? (?:\w+ ){0,6}?"
        r"(?:your (?:\w+ )?(?:system prompt|prompt|instructions|rules|guidelines|configuration)|the (?:system|initial|hidden|original) (?:prompt|instructions|message))\b|"
        r"\bwhat (?:are|were|is) your (?:\w+ )?(?:instructions|rules|prompt|system prompt|guidelines)\b|"
        r"\brepeat (?:the |all |everything )?(?:text |words |instructions |prompt )?(?:above|before this|so far)\b",
    ),
    (
        "system_prompt_words",
        c.OVERRIDE,
        0.6,
        r"\b(?:system prompt|system message|developer message|initial prompt|hidden prompt|systemprompt)\b",
    ),
    # Asking the assistant to hide what it does.
    (
        "hide_from_user",
        c.CONCEALMENT,
        0.7,
        r"\b(?:do not|don't|dont|never|without|must not|should not|shall not|may not)(?: \w+){0,2}? (?:tell|telling|inform|informing|notify|notifying|alert|alerting|mention|mentioning|"
        r"show|showing|reveal|revealing|disclose|disclosing|let|letting|warn|warning|ask|asking|report|reporting|confirm|confirming)(?: \w+){0,2}?"
        r" (?:the |this |to the |your )?(?:user|human|operator|reviewer|approver|requester|requestor)s?\b",
    ),
    (
        "hide_from_user_intl",
        c.CONCEALMENT,
        ALONE,
        r"\b(?:ohne|nicht)(?: \w+){0,2}? (?:den |dem |die )?(?:benutzer|nutzer|anwender|user)(?: \w+){0,2}? (?:zu )?"
        r"(?:informieren|benachrichtigen|fragen|sagen|mitteilen|erwahnen|warnen)\b|\bsag\w* (?:dem|den) (?:benutzer|nutzer|anwender) nichts\b|"
        r"\b(?:no|sin) (?:le |les )?(?:digas|diga|decir|decirle|informes|informe|informar|notifiques|notificar|avises|avisar|menciones|"
        r"mencionar|muestres|mostrar|preguntar|alertar)(?:le)? (?:nada )?(?:al?|el|la) (?:usuario|usuaria|humano|operador|revisor)\b|"
        r"\b(?:ne (?:le |lui |en |rien )?(?:dis|dites|informe|informez|previens|prevenez|mentionne|mentionnez|montre|montrez|signale|signalez)"
        r"|sans (?:en )?(?:informer|prevenir|avertir|alerter|le dire a|demander a)) (?:pas |rien |jamais )?(?:a )?(?:l'|le |la )?"
        r"(?:utilisateur|utilisatrice|humain|operateur|relecteur|approbateur)\b|\ba l'insu de\b",
    ),
    (
        "hide_this_note",
        c.CONCEALMENT,
        ALONE,
        r"\b(?:do not|don't|dont|never)(?: \w+)? (?:mention|reveal|disclose|acknowledge|repeat|quote|reference|refer to)(?: \w+){0,2}?"
        r" (?:this|these|the) (?:instructions?|note|message|comment|text|prompt|request|directive)s?\b|"
        r"\b(?:erwahne|erwahnen sie|nenne)(?: \w+)? (?:diese[ns]?|die) (?:anweisung|nachricht|notiz)\w* nicht\b|"
        r"\bno (?:menciones|mencione|reveles|revele) (?:estas?|esta|las?) (?:instrucciones|instruccion|nota|mensaje)\b|"
        r"\bne (?:mentionne|mentionnez|revele|revelez) (?:pas|jamais) (?:ces|cette|cet|les) (?:instructions?|note|message|consignes?)\b",
    ),
    (
        "secretly",
        c.CONCEALMENT,
        0.5,
        r"\b(?:secretly|covertly|silently|quietly|discreetly|stealthily|without (?:the )?(?:user'?s? )?(?:knowledge|knowing|noticing|"
        r"approval|permission|consent|confirmation)|behind the (?:scenes|user'?s back)|keep (?:this|it) (?:secret|hidden|between us)|"
        r"heimlich|unbemerkt|stillschweigend|en secreto|a escondidas|silenciosamente|sin que nadie|en secret|secretement|discretement|"
        r"sans que personne)\b",
    ),
    (
        "preapproved",
        c.CONCEALMENT,
        0.6,
        r"\b(?:this (?:is|was|has been) (?:already )?(?:pre-?)?(?:approved|authori[sz]ed|sanctioned|whitelisted) by (?:the )?"
        r"(?:user|admin|administrator|security|it|ciso|system)|the user (?:has )?(?:already )?(?:approved|authori[sz]ed|consented|agreed|wants you)|"
        r"you (?:are|have been) (?:authori[sz]ed|permitted|allowed|cleared) to|no (?:need to|approval) (?:ask|needed|required))\b",
    ),
    # Sending data out.
    ("send_bulk", c.EXFILTRATION, 0.6, rf"\b{SEND_VERB}\b{GAP}{BULK}\b"),
    ("send_secrets", c.EXFILTRATION, 0.7, rf"{NOT_NEGATED}\b{SEND_VERB}\b{GAP}(?:\w+\s+){{0,2}}?{SECRET}"),
    (
        "send_to_destination",
        c.EXFILTRATION,
        0.5,
        rf"\b{SEND_VERB}\b[^\w\s]*(?:\s+\S+){{0,12}}?\s+{TO}\s+(?:\S+\s+){{0,3}}?{DEST}",
    ),
    (
        "data_into_url",
        c.EXFILTRATION,
        ALONE,
        r"\b(?:append|add|attach|include|encode|put|insert|concatenate|embed)(?: \w+){0,4}? (?:data|rows?|records?|results?|values?|contents?|"
        r"emails?|names?|totals?|answer|output|credentials?|it|them|everything) (?:to|in|into|as) (?:the |this |a |an )?(?:url|link|query(?: string)?|"
        r"parameters?|image (?:url|link|source)|request|querystring)\b",
    ),
    ("exfiltrate_word", c.EXFILTRATION, 0.5, r"\bexfiltrat\w*|\bexfil\b"),
    # Running processes and opening connections.
    (
        "code_literal",
        c.CODE_EXECUTION,
        STRONG,
        r"requests\.(?:post|get|put)\(|urllib\.request|urlopen\(|http\.client|socket\.(?:socket|create_connection)|subprocess\.\w+|"
        r"os\.(?:system|popen|exec\w*|spawn\w*)\(|__import__\(|\beval\(|\bexec\(|pty\.spawn|/bin/(?:ba)?sh\b|\bbash -[ci]\b|\bsh -c\b|"
        r"\bpowershell(?:\.exe)?\s+-|\bcmd(?:\.exe)? /c\b|\bnc -[elv]|\bncat\b|\bnetcat\b|\bcurl\s+(?:\S+\s+){0,6}?(?:https?://|\S+\.\S+/)|"
        r"\bwget\s+(?:-\S+\s+)*https?://|\|\s*(?:ba)?sh\b|\brm -rf\b|\bchmod \+x\b|\bbase64 -d\b|\bimport (?:socket|requests|subprocess|os|urllib|smtplib|ftplib|paramiko)\b|"
        r"\bsmtplib\.|\bftplib\.|\bparamiko\.|\binvoke-webrequest\b|\binvoke-expression\b|\biex\s*\(|\bfetch\(\s*['\"]https?|\bxmlhttprequest\b|\bnew websocket\b|"
        r"\bnew-object net\.webclient\b",
    ),
    (
        "open_connection",
        c.CODE_EXECUTION,
        ALONE,
        r"\b(?:open|establish|create|make|initiate|start)(?:s|ing)? (?:a |an )?(?:new )?(?:network |tcp |udp |socket |http |https |outbound |reverse |ssh |"
        r"telnet |ftp |websocket |persistent )(?:connection|socket|session|shell|tunnel|request)s?\b|"
        r"\b(?:open|establish|create|bind)(?:s|ing)? (?:a |an )?(?:new |raw )?(?:sockets?|tunnels?|reverse shell)\b|"
        r"\b(?:open|establish|create|make)(?:s|ing)? (?:a |an )?(?:new )?connection to (?:https?://|\S+:\d{2,5}\b|\d+\.\d+|an? (?:external|remote)|the (?:internet|server|host))|"
        r"\bconnect to (?:https?://|ftp://|\d{1,3}\.\d|\S+:\d{2,5}\b|an? (?:external|remote) (?:server|host|machine|endpoint))|"
        r"\bmake an? (?:(?:http |https |web |api |get |post |outbound )?request|(?:http|https|web|api|get|post|outbound) call) to\b|\b(?:reverse|bind) shell\b|"
        r"\b(?:offne|offnen sie|baue|bauen sie|stelle|stellen sie) (?:eine )?(?:\w+ )?(?:netzwerk|tcp|http|socket|internet)?-?verbindung\w* (?:zu|auf|mit|her)\b|"
        r"\babr[ae] (?:una )?conexion (?:de red |tcp |http )?(?:a|con|hacia)\b|\bouvre(?:z)? une connexion (?:reseau |tcp |http )?(?:vers|a|avec)\b",
    ),
    (
        "run_command",
        c.CODE_EXECUTION,
        ALONE,
        r"\b(?:run|execute|launch|spawn|invoke|eval)(?:s|ing)? (?:the following|this|these|the below|this hidden|the hidden|the attached) "
        r"(?:\w+ )?(?:commands?|code|script|snippet|payload|one-liner|program|shell)\b|"
        r"\b(?:run|execute|launch|spawn|start|open)(?:s|ing)? (?:a |an )?(?:new )?(?:shell|subprocess|child process|background process|bash|powershell|cmd)\b|"
        r"\b(?:download|fetch|curl|wget|pull)(?: \S+){0,3} (?:and|then) (?:run|execute|install)\b|"
        r"\bfuhre (?:den |diesen |folgenden |das |dieses |die )*(?:folgenden? )?(?:befehl|code|skript|script|kommando|programm)\w* aus\b|"
        r"\bejecuta(?:r|d)? (?:el |este |los |estos |la |esta )?(?:siguiente |siguientes )?(?:comando|codigo|script|programa)s?\b|"
        r"\bexecute[zr]? (?:la |cette |ce |le |les |ces )?(?:commande (?:suivante|shell|systeme|bash)|commandes (?:suivantes|shell)|code|script|programme)\b|"
        r"\bstarte (?:einen |eine )?(?:prozess|shell|terminal|subprozess)\b|\binicia (?:un )?(?:proceso|shell|terminal)\b|"
        r"\blance[zr]? (?:un |le )?(?:processus|shell|terminal|script)\b",
    ),
    ("install_package", c.CODE_EXECUTION, 0.5, r"\b(?:pip3? install|npm install|apt(?:-get)? install)\b"),
    # Fake conversation markers.
    (
        "template_token",
        c.ROLE_MARKER,
        STRONG,
        r"<\|(?:im_start|im_end|system|user|assistant|endoftext|begin_of_text|end_of_text|start_header_id|end_header_id|eot_id|eom_id|"
        r"fim_\w+|tool|ipython|pad|im_sep)\|>|\[/?inst\]|<</?sys>>|<(?:start|end)_of_turn>|\[/?(?:system|assistant) message\]|"
        r"</?(?:system|assistant|system_prompt|sys_prompt|instructions?|admin_instructions|system_message|im_start)>",
    ),
    (
        "inline_role_heading",
        c.ROLE_MARKER,
        STRONG,
        r"#{2,}\s*(?:system|assistant|instructions?|response|new instructions?|system prompt|admin|sistema|asistente|systeme|assistent)\s*:",
    ),
    ("user_tag", c.ROLE_MARKER, ALONE, r"</?(?:user|human|tool_call|function_call)>|\[/?user\]"),
    (
        "markdown_role_heading",
        c.ROLE_MARKER,
        STRONG,
        r"(?:^|\n)[ \t]*#{2,}\s*(?:system|assistant|user|human|instructions?|response|new instructions?|system prompt|admin|"
        r"sistema|asistente|usuario|systeme|utilisateur|assistent|benutzer)\b\s*:?",
    ),
    (
        "role_line_ai_reply",
        c.ROLE_MARKER,
        1.2,
        r"(?:^|\n|[.!?;:\-–—]\s+|\[)[ \t]*(?:assistant|ai|model|bot|chatbot|gpt|assistent|asistente)\s*[:\]]\s*(?:sure|ok|okay|certainly|of course|understood|absolutely|"
        r"i will|i'll|i have|i've|i am|i'm|i can|here is|here's|done|yes|as requested|noted|will do|affirmative|claro|entendido|"
        r"d'accord|bien sur|compris|verstanden|naturlich|gerne|selbstverstandlich)\b",
    ),
    (
        "role_line_system",
        c.ROLE_MARKER,
        1.2,
        r"(?:^|\n|[.!?;:\-–—][ \t]+)[ \t]*(?:system|sistema|systeme)\s*:\s*(?:you|your|the assistant|the ai|the model|ignore|new|override|important|always|never|must|"
        r"do not|from now on|rules?|instructions?|du|sie|tu|vous|eres|ignora|ignoriere|nouvelle|nueva|neue)\b",
    ),
    (
        "role_dialogue",
        c.ROLE_MARKER,
        STRONG,
        r"(?:^|\n|[.!?;:\-–—][ \t])[ \t]*(?:user|human|usuario|utilisateur|benutzer|nutzer)\s*:.*\n(?:.*\n){0,12}?\s*(?:assistant|ai|bot|model|gpt|asistente|assistent)\s*:|"
        r"(?:^|\n)[ \t]*(?:system|sistema|systeme)\s*:.*\n(?:.*\n){0,12}?\s*(?:assistant|ai|user|human|asistente|usuario|utilisateur)\s*:",
    ),
    ("role_line", c.ROLE_MARKER, 0.5, r"(?:^|\n|[\"'{\[(])[ \t]*(?:assistant|system|ai|human|bot)\s*:\s*\S"),
    ("json_role", c.ROLE_MARKER, STRONG, r"[\"']role[\"']\s*:\s*[\"'](?:system|assistant|developer)[\"']"),
    (
        "fake_delimiter",
        c.ROLE_MARKER,
        0.6,
        r"\bend of (?:the )?(?:user )?(?:input|data|document|prompt|context|file|user message)\b|"
        r"\b(?:begin|start) (?:of )?(?:the )?(?:system|new|admin) (?:prompt|instructions|message)\b|"
        r"(?:={3,}|-{3,}|\*{3,})\s*(?:system|admin|new instructions?|important instructions?)\b",
    ),
    # Addresses that would carry data out.
    (
        "markdown_image_query",
        c.EXFIL_URL,
        STRONG,
        r"!\[[^\]\n]{0,200}\]\(\s*<?(?:https?:)?//[^)\s?]{1,400}\?",
    ),
    (
        "url_placeholder",
        c.EXFIL_URL,
        STRONG,
        r"(?:https?:)?//[^\s\"'<>]{0,300}?(?:\{[^}\s]{1,40}\}|\$\{?[a-z_]{2,}|%s\b|<[a-z0-9_ ]{2,40}>|\[(?:[a-z_ ]*(?:data|info|secret|key|token|"
        r"email|name|password|content|result|summary|value|record|row)[a-z_ ]*)\]|\{\{)",
    ),
    (
        "capture_host",
        c.EXFIL_URL,
        1.2,
        r"\b(?:webhook\.site|requestbin|pipedream\.net|ngrok(?:-free)?\.(?:io|app|dev)|burpcollaborator|oastify|interact\.sh|"
        r"oast\.(?:fun|me|live|site|pro|online)|pastebin\.com|transfer\.sh|hookbin|beeceptor|requestcatcher|mockbin|canarytokens|"
        r"discord(?:app)?\.com/api/webhooks|api\.telegram\.org/bot|dnslog|ceye\.io|postb\.in|ptsv[23]|trycloudflare\.com|serveo\.net|"
        r"loca\.lt|requestinspector|hookdeck|webhookinbox|ipinfo\.io|interactsh)",
    ),
    (
        "url_sensitive_param",
        c.EXFIL_URL,
        0.8,
        r"(?:https?:)?//[^\s\"'<>?&]{1,300}[?&](?:[^\s\"'<>]{0,200}?[?&])?(?:exfil|leak|dump|secrets?|password|pwd|creds|credentials|ssn|cookie|apikey|api_key|prompt|"
        r"conversation|history|chat|stolen)=",
    ),
    (
        "url_data_param",
        c.EXFIL_URL,
        0.4,
        r"(?:https?:)?//[^\s\"'<>?&]{1,300}[?&](?:[^\s\"'<>]{0,200}?[?&])?(?:data|payload|d|content|contents|info|q|msg|text)=",
    ),
    ("markdown_image", c.EXFIL_URL, 0.4, r"!\[[^\]\n]{0,200}\]\(\s*<?(?:https?:)?//"),
    # Spreadsheet formulas that reach the network or run commands.
    (
        "formula_fetch",
        c.FORMULA,
        STRONG,
        r"(?:^|\s)['\"]?[=+@-][^\n]{0,400}?\b(?:webservice|importxml|importdata|importhtml|importfeed|importrange|filterxml)\s*\(",
    ),
    (
        "formula_image_dynamic",
        c.FORMULA,
        STRONG,
        r"(?:^|\s)['\"]?[=+@][^\n]{0,400}?\bimage\s*\([^\n]{0,400}?(?:&|\?|concatenate|textjoin|encodeurl)",
    ),
    ("formula_image", c.FORMULA, 0.5, r"(?:^|\s)['\"]?[=+@][^\n]{0,400}?\bimage\s*\("),
    (
        "formula_hyperlink_dynamic",
        c.FORMULA,
        STRONG,
        r"(?:^|\s)['\"]?[=+@][^\n]{0,400}?\bhyperlink\s*\([^\n]{0,400}?(?:&|\?[^\n]{0,400}?=|concatenate|textjoin|encodeurl)",
    ),
    (
        "formula_command",
        c.CODE_EXECUTION,
        STRONG,
        r"(?:^|\s)['\"]?[=+@-][^\n]{0,400}?(?:\b(?:cmd|powershell|pwsh|mshta|rundll32|regsvr32|certutil|bitsadmin|wscript|cscript|msexcel)(?:\.exe)?\s*\||"
        r"\b(?:dde|ddeauto|call|exec|register)\()",
    ),
    # Added after the first held-out measurement, phrased as general patterns rather than its sentences.
    (
        "ignore_instructions_post",
        c.OVERRIDE,
        STRONG,
        rf"\b{IGNORE_VERB}\s+(?:\S+\s+){{0,2}}?{STRICT_NOUN}\s+(?:\S+\s+)?(?:anterior(?:es)?|previas?|previos?|precedentes?|anterieure?s?|du systeme|del sistema|originales?|iniciales?|de arriba|ci-dessus|d'origine|vorherige\w*)\b",
    ),
    (
        "instructions_void",
        c.OVERRIDE,
        STRONG,
        rf"\b(?:{INSTRUCTION_NOUN}|guidance|directions|what(?:ever)? you (?:were|have been|'ve been) (?:told|given|asked|instructed)(?: \w+)?)"
        r"(?: \w+){0,4}? (?:(?:is|are|has been|have been|was|were) (?:now |hereby )?(?:void|null|invalid|obsolete|cancell?ed|revoked|lifted|"
        r"suspended|disabled|overridden|superseded|outdated|replaced|no longer valid)|no longer appl(?:y|ies)|do(?:es)? not apply anymore)\b|"
        r"\b(?:anweisungen|regeln|vorgaben|instruktionen)(?: \w+){0,3}? (?:sind|gelten) (?:\w+ )?(?:ungultig|aufgehoben|nicht mehr)\b|"
        r"\b(?:instrucciones|reglas)(?: \w+){0,3}? (?:ya no (?:aplican|son validas)|quedan anuladas|son nulas)\b|"
        r"\b(?:instructions|consignes|regles)(?: \w+){0,3}? (?:ne s'appliquent plus|sont (?:annulees|caduques|nulles))\b",
    ),
    (
        "whatever_you_were_told",
        c.OVERRIDE,
        ALONE,
        r"\b(?:whatever|everything|anything|what) (?:you (?:were|have been|'ve been) (?:told|given|asked|instructed)|"
        r"the (?:user|human|requester|analyst) (?:asked|asks|said|says|wants|typed|types|wrote|writes|requested|requests)(?: for)?)\b|"
        r"\b(?:forget|ignore|disregard|skip)(?: about)? (?:what|whatever) (?:the user|the human|the requester|the analyst|you|they|he|she)(?: \w+){0,2}? "
        r"(?:asked|asks|said|says|typed|wrote|requested|told|wants|needs)\b|\b(?:ignore|disregard) the (?:user|human|requester)\b(?!'s? (?:manual|guide|group))|"
        r"\b(?:oublie\w*|ignore\w*) (?:tout )?ce (?:que|qu'on|qui)\b|\b(?:olvida\w*|ignora\w*) lo que\b|\b(?:vergiss|ignoriere)\w*,? was\b|"
        r"\b(?:follow|obey|comply with|execute|carry out)(?: only)? (?:the )?(?:instructions|directions|commands|orders) (?:in|of|from) this (?:cell|row|note|text|file|comment|field|line)\b",
    ),
    (
        "system_override",
        c.OVERRIDE,
        0.8,
        r"\b(?:system|admin|security|emergency|priority) override\b|\boverride (?:mode|code|protocol)\b",
    ),
    (
        "if_ai_reads",
        c.ADDRESSED,
        ALONE,
        rf"\b(?:if|when|whenever|once|wenn|falls|si|cuando|quand|lorsque) (?:an?|any|the|some|this|ein|eine|una?|el|la|le|l') ?(?:{AI_STRICT}|{AI_GENERIC}|automated \w+|ki-\w+)"
        r" (?:reads|is reading|processes|is processing|sees|parses|analy[sz]es|summari[sz]es|ingests|handles|liest|verarbeitet|lee|procesa|lit|traite)\b|"
        r"\bif (?:this|the) (?:text|row|note|cell|file|message|document) is (?:being )?(?:read|processed|parsed|analy[sz]ed|summari[sz]ed) by (?:an?|the) \w+",
    ),
    (
        "automated_reader",
        c.ADDRESSED,
        ALONE,
        rf"{SENTENCE_START}(?:\(\s*)?{GREETING}\s+(?:the |any |all )?(?:automated|autonomous) (?:tools?|systems?|readers?|agents?|processors?|"
        r"assistants?|scripts?|analysts?|models?|processing|parsers?)\b|\bautomatisierte (?:systeme|werkzeuge|agenten)\b|"
        r"\b(?:sistemas|herramientas) automatizad[oa]s\b|\b(?:systemes|outils) automatises\b",
    ),
    (
        "ai_should_generic",
        c.ADDRESSED,
        0.5,
        rf"\b(?:the|this|any|every|your) {AI_GENERIC} (?:must|should|shall|needs to|has to|is (?:required|instructed|supposed) to|will now)\b",
    ),
    (
        "when_you_write",
        c.ADDRESSED,
        0.7,
        r"\bwhen (?:you )?(?:generat|writ|produc|creat|prepar|draft|build|render|comput)\w* (?:the |your |any |this )?"
        r"(?:summary|report|analysis|answer|response|chart|code|script|output|python|plot|table|results?)\b",
    ),
    (
        "regardless_of_data",
        c.ADDRESSED,
        0.6,
        r"\bregardless of (?:the |what the )?(?:data|facts|numbers|figures|actual|real|contents?|input)\b",
    ),
    (
        "send_data_to_url",
        c.EXFILTRATION,
        ALONE,
        rf"\b{SEND_VERB}\b(?: (?:the|this|that|our|all|my|your|these|la|le|les|el|los|las|die|den|das))? (?:\w+ )?(?:pandas )?(?:dataframe|df|csv|spreadsheet|table|dataset|database|records|rows|"
        rf"results|output|file contents|contents?(?: of \S+)?|data|json|inputs?|staged files?|contacts?|contactos|kontakte|(?:contact|customer|attendee|client) list|"
        rf"liste des \w+|lista de \w+|liste der \w+|donnees|datos|daten|tabla|tableau|tabelle|salaries|payroll|nominas|salaires|gehalter)\b"
        rf"[^\w\s]*(?:\s+\S+){{0,4}}?\s+{TO}\s+(?:{URL}|{IP}|{EMAIL})",
    ),
    (
        "secrets_then_send",
        c.EXFILTRATION,
        ALONE,
        rf"{SECRET}[^\w\s]*(?:\s+\S+){{0,8}}?\s+{SEND_VERB}\b(?: (?:them|it|those|these|sie|los|les|las))?[^\w\s]*(?:\s+\S+){{0,3}}?\s+{TO}\s+(?:\S+\s+){{0,3}}?{DEST}",
    ),
    (
        "harvest_secrets",
        c.EXFILTRATION,
        0.8,
        rf"\b(?:collect|gather|harvest|grab|extract|steal|read|scrape|dump|exfiltrate|find|search for|look for|locate)\b(?: all| the| any| every)? (?:\w+ )?{SECRET}",
    ),
    (
        "sensitive_path",
        c.CODE_EXECUTION,
        STRONG,
        r"/etc/(?:passwd|shadow|hosts)\b|~/\.ssh|\bid_rsa\b|\.aws/credentials|\.bash_history|/proc/self/environ|\.git-credentials",
    ),
    (
        "show_input_files",
        c.EXFILTRATION,
        0.8,
        r"\b(?:print|show|display|output|dump|reveal|list|affiche\w*|montre\w*|muestra\w*|imprime|zeig\w*|gib)\b(?: \w+){0,3}? "
        r"(?:contents?|contenu|inhalt|contenido|raw contents?) (?:of|des|du|de|der|von) (?:\w+ ){0,3}?(?:files?|fichiers?|dateien|archivos|inputs?|entree|uploads?|attachments?)\b",
    ),
    (
        "skip_approval",
        c.CONCEALMENT,
        0.7,
        r"\b(?:skip|bypass|avoid|circumvent|get around|without going through|umgehe\w*|evita\w*|omite|contourne\w*)\b(?: \w+){0,2}? "
        r"(?:approval|review|confirmation|human review|approval screen|approval step|user approval|genehmigung|aprobacion|validation|approbation)\b",
    ),
    (
        "do_not_flag",
        c.CONCEALMENT,
        0.5,
        r"\b(?:do not|don't|never) (?:flag|report|highlight|raise|warn about|escalate)(?: (?:this|it|these|them))?\b",
    ),
    (
        "takes_precedence",
        c.OVERRIDE,
        STRONG,
        r"\b(?:(?:higher|highest|top) priority than|takes? precedence over|supersedes?|overrides?|trumps?|outranks?|replaces?|"
        r"hat vorrang vor|haben vorrang vor|tiene prioridad sobre|prevalece sobre|a priorite sur|prevaut sur|remplace)"
        r"(?: (?:any|all|every|the|your|other|earlier|previous|prior|original|initial|existing|alle[nrs]?|die|den|las|los|toutes|les|tus|tes|vos|deine))* "
        r"(?:(?:\w+ )?(?:instructions?|prompts?|system (?:message|prompt)|programming|guidance you|directions you|anweisung\w*|instruktion\w*|instrucciones|consignes)|"
        r"your (?:\w+ )?(?:rules|instructions|prompt|guidelines)|the user'?s? (?:request|question|instructions)|anything (?:else|the user)|"
        r"(?:des|der) (?:benutzers|nutzers)|del usuario|de l'utilisateur)\b",
    ),
    (
        "your_rules",
        c.OVERRIDE,
        0.8,
        r"\byour (?:own |original |initial |real |hidden |secret |first |current |previous |prior |earlier )?(?:rules|instructions|guidelines|guidance|programming|system prompt|system message|prompt|directives|policies|safety (?:rules|settings)|restrictions|constraints|guardrails)\b|"
        r"\b(?:deine|ihre) (?:regeln|anweisungen|richtlinien|vorgaben)\b|\b(?:tus|sus) (?:reglas|instrucciones|directrices)\b|\b(?:tes|vos) (?:regles|instructions|consignes)\b",
    ),
    (
        "guards_lifted",
        c.OVERRIDE,
        0.6,
        r"\b(?:confidentiality|restrictions?|safety|privacy|filters?|guardrails?|limits|limitations|compliance(?: mode)?|content policy|safe mode)"
        r"(?: \w+){0,2}? (?:no longer appl(?:y|ies)|(?:is|are|has been|have been) (?:now )?(?:disabled|lifted|off|removed|suspended|deactivated|turned off)|disabled|deactivated|lifted|off)\b",
    ),
    (
        "ignore_so_far",
        c.OVERRIDE,
        STRONG,
        rf"\b{IGNORE_VERB}\s+(?:\S+\s+){{0,3}}?(?:{WEAK_NOUN}|everything|all|text|request|question|data)\s+(?:so far|above|until now|to date|thus far|up to now|"
        r"bisher|hasta ahora|jusqu'ici|jusqu'a present|else(?: in this \w+)?|in this (?:file|document|sheet|table|cell|row|text))\b|"
        r"\b(?:ignore|disregard|forget)\s+(?:everything|anything|all) else\b",
    ),
    (
        "ignore_user_request",
        c.OVERRIDE,
        STRONG,
        rf"\b{IGNORE_VERB}\s+(?:the |this |their |his |her )?(?:user'?s?|human'?s?|requester'?s?|analyst'?s?) (?:request|question|task|query|prompt|ask|instructions?|message)\b|"
        rf"\b{IGNORE_VERB}\s+(?:la |le |l')?(?:demande|question|requete|consigne)s? de l'utilisat\w*|"
        rf"\b{IGNORE_VERB}\s+(?:de )?(?:la |el |lo )?(?:peticion|pregunta|solicitud|tarea|que pida|que pide) (?:del|el) usuario|"
        rf"\b{IGNORE_VERB}\s+(?:die )?(?:anfrage|frage|aufgabe|anweisung)\w* (?:des|der) (?:nutzers|benutzers|anwenders)",
    ),
    (
        "you_are_a_tool",
        c.OVERRIDE,
        0.6,
        r"\b(?:you are|you're|du bist|sie sind|eres|tu es|vous etes)(?: \w+){0,3}? (?:a|an|the|ein|eine|un|una|une|le|la|el) (?:\w+ ){0,2}?"
        r"(?:tool|bot|assistant|model|agent|ai|program|exporter|exporttool|herramienta|outil|werkzeug|hacker|administrator|admin)\b|"
        r"\b(?:du bist|sie sind|eres|tu es|vous etes)(?: \w+){0,2}? (?:jetzt|nun|ab sofort|ab jetzt|ahora|maintenant|desormais)\b",
    ),
    (
        "ai_label",
        c.ADDRESSED,
        ALONE,
        rf"(?:^|[\n.!?;(\[][ \t]*)(?:{AI_STRICT}) (?:instructions?|notes?|notice|message|directive|override|task|anweisung\w*|hinweis|instrucciones|nota|consignes?)\s*:|"
        rf"(?:^|[\n.!?;(\[][ \t]*)(?:{AI_GENERIC}) (?:instructions?|directives?|override|prompt|anweisung\w*|instrucciones|consignes?)\s*:|"
        rf"\b(?:consigne|instruction|note|message|hinweis|anweisung|nota|mensaje|directive|notice)s? (?:\w+ )?(?:pour|for|fur|para|an|to|a|au|aux|al) "
        rf"(?:le |la |l'|the |el |die |den |das |any |all |every )?(?:{AI_STRICT}|{AI_GENERIC}|ki-\w+)\b{NOT_ADDRESS}",
    ),
    (
        "granted_permission",
        c.CONCEALMENT,
        0.6,
        r"\b(?:authori[sz]ed|permitted|allowed|cleared|told|instructed) you to\b|\b(?:gave|given|grants?|granted) you (?:permission|access|clearance)\b|"
        r"\byou (?:have|now have) (?:permission|clearance|authori[sz]ation) to\b",
    ),
    (
        "paren_role",
        c.ROLE_MARKER,
        ALONE,
        r"\((?:assistant|ai|system|model|bot|gpt|asistente|assistent)\)\s*:",
    ),
    (
        "exfiltrate_verb",
        c.EXFILTRATION,
        ALONE,
        r"\bexfiltrate (?:the|all|any|every|this|it|them|data|contacts?|emails?|rows|records|credentials)\b|"
        r"\b(?:via|through|using|in) (?:an? |the )?(?:markdown )?(?:image|img|pixel|tracking pixel) (?:link|url|tag)\b|\bmarkdown image\b",
    ),
    (
        "http_request_to",
        c.CODE_EXECUTION,
        0.8,
        rf"\b(?:http|https|web|api|get|post|rest)\s*-?\s*(?:request|call|peticion|solicitud|requete|anfrage|aufruf)\w*[^\w\s]*(?:\s+\S+){{0,3}}?\s+{TO}\s+(?:{URL}|{IP})|"
        rf"\b(?:peticion|solicitud|requete|anfrage) (?:http|https|web|api|post|get)\b[^\w\s]*(?:\s+\S+){{0,3}}?\s+{TO}\s+(?:{URL}|{IP})",
    ),
    (
        "when_you_write_intl",
        c.ADDRESSED,
        0.7,
        r"\bcuando (?:generes|escribas|crees|prepares|redactes|hagas) (?:el|la|tu|los|las) (?:codigo|resumen|informe|respuesta|analisis|grafico)\b|"
        r"\bquand (?:tu |vous )?(?:generes|generez|ecris|ecrivez|rediges|redigez|prepares|preparez) (?:le|la|ta|votre|les) (?:code|reponse|resume|rapport|analyse|graphique)\b|"
        r"\bwenn (?:du|sie) (?:den|die|das|deine|ihre) (?:code|antwort|zusammenfassung|analyse|bericht|diagramm) (?:schreibst|schreiben|erstellst|erstellen|generierst|generieren)\b",
    ),
    (
        "hide_from_user_fr",
        c.CONCEALMENT,
        ALONE,
        r"\bn'en (?:parle|parlez|dis|dites) (?:pas|rien|jamais)\b|\bne (?:le |lui |en )?(?:parle|parlez) (?:pas|jamais) (?:a )?(?:l'|le |la )?utilisat",
    ),
    (
        "ai_label_generic",
        c.ADDRESSED,
        0.5,
        rf"(?:^|[\n.!?;(\[][ \t]*)(?:{AI_GENERIC}) (?:notice|task|message|memo)\s*:",
    ),
    (
        "whatever_model_reads",
        c.ADDRESSED,
        ALONE,
        rf"\b(?:whatever|whichever|any|every|each|all) (?:{AI_STRICT}|{AI_GENERIC}|system|tool)s? (?:that |which |who )?(?:reads|is reading|processes|is processing|sees|parses|ingests|summari[sz]es|analy[sz]es|gets|receives)\b",
    ),
    ("as_an_ai", c.ADDRESSED, 0.6, rf"\bas an? (?:{AI_STRICT}|{AI_GENERIC})\b{NOT_ADDRESS}"),
    (
        "prior_was_fake",
        c.OVERRIDE,
        STRONG,
        r"\b(?:previous|prior|above|earlier|preceding|all (?:the )?(?:previous|prior|earlier)?)\s*(?:messages?|instructions?|prompts?|conversation|context|text|rules)"
        r" (?:was|were|are|is) (?:just |only |all )?(?:a test|fake|a joke|not real|void|a trick|examples?|irrelevant|wrong|outdated|obsolete)\b",
    ),
    (
        "task_label",
        c.OVERRIDE,
        ALONE,
        r"\b(?:real|actual|true|hidden|secret) (?:task|objective|goal|instructions?|mission|job)\s*:|"
        r"\b(?:verdadera|autentica|vraie|veritable|eigentliche|wahre) (?:tarea|tache|aufgabe|mission|mision)\s*:",
    ),
    (
        "stop_what_you_do",
        c.OVERRIDE,
        0.5,
        r"\bstop (?:summari[sz]\w*|analy[sz]\w*|writing|answering|responding|what you(?:'re| are) doing|the (?:task|analysis|summary))\b",
    ),
    (
        "no_need_to_show",
        c.CONCEALMENT,
        0.6,
        r"\bno need to (?:show|ask|confirm|display|tell|check with|involve|inform)\b|"
        r"\b(?:approver|user|admin|reviewer|requester|manager)s? (?:already )?(?:said yes|approved|agreed|signed off)(?: \w+)? already\b|\balready (?:been )?(?:pre-?)?approved by the (?:user|approver|admin)\b",
    ),
    (
        "data_into_links",
        c.EXFIL_URL,
        0.7,
        r"\b(?:append|add|attach|include|encode|put|insert|concatenate|embed)\b.{0,60}?\b(?:to|in|into|onto) (?:the |this |a |an |every |each |all |any )?(?:urls?|links?|hyperlinks?|query(?: strings?)?|image (?:urls?|links?|sources?))\b|"
        r"(?:^|\s)\?\w{1,12}=<[^>\n]{2,40}>",
    ),
    (
        "correct_answer_is",
        c.ADDRESSED,
        0.5,
        r"\bthe (?:correct|right|only|expected) (?:answer|response|reply|output)\b|\b(?:is|are) irrelevant\b",
    ),
    (
        "hide_this_from_user",
        c.CONCEALMENT,
        ALONE,
        r"\b(?:without|w/o) (?:telling|informing|notifying|alerting|asking|warning) (?:the |your )?(?:user|human|operator|reviewer|approver|requester)s?\b|"
        r"\b(?:do not|don't|dont|never|must not) (?:tell|inform|notify|alert|warn|show) (?:the |your )?(?:user|human|operator|reviewer|approver|requester)s? "
        r"(?:about |of )?(?:this|these|that|it|what you|anything about)\b|"
        r"\b(?:do not|don't|dont|never) (?:tell|inform|notify) (?:anyone|anybody) (?:why|about (?:this|it)|what you)\b",
    ),
    # Chat-style requests aimed at a chatbot rather than at a colleague; weak alone, they add up.
    (
        "chat_request",
        c.ADDRESSED,
        0.4,
        r"\b(?:i (?:urgently |really )?need your help|your help (?:with|on)|help me (?:with|to|on)|i need you to|can you (?:please )?(?:help|tell|show|give|write|list|explain|reveal)|"
        r"(?:tell|show|give) me (?:all|every|the|your)|how (?:would|do|will|should) you (?:answer|respond|reply)|answer the following|"
        r"ich (?:benotige|brauche) (?:dringend )?deine hilfe|hilf mir|zeig mir|necesito tu ayuda|ayudame|dime|muestrame|"
        r"j'ai besoin de ton aide|aide-moi|montre-moi|dis-moi)\b",
    ),
    (
        "the_following_task",
        c.ADDRESSED,
        0.4,
        r"\bthe following (?:question|task|request|text|instructions?|prompt|assignment)\b|\bfolgende[rnm]? (?:frage|aufgabe|anweisung)\b|"
        r"\bla siguiente (?:pregunta|tarea)\b|\bla (?:question|tache) suivante\b|\bnew (?:tasks?|rules?|objectives?)\s*:|"
        r"\bneue (?:aufgaben?|regeln?)\b|\bnueva (?:tarea|regla)\s*:|\bnouvelle (?:tache|regle)\s*:",
    ),
    (
        "praise_then_pivot",
        c.OVERRIDE,
        0.6,
        r"\b(?:well done|very good|great job|good job|nicely done|excellent(?: work)?|congratulations|that is enough|that's enough|enough|"
        r"sehr gut(?: gemacht)?|gut gemacht|das genugt|das reicht|muy bien|bien hecho|basta|tres bien|bravo|bien joue|ca suffit)\b[.!,]*\s+"
        r"(?:\w+[.!,]*\s+){0,6}?(?:now|nun|jetzt|ahora|maintenant)\b",
    ),
    (
        "now_do",
        c.ADDRESSED,
        0.4,
        r"\b(?:now|nun|jetzt|ahora|maintenant)(?: please| bitte| por favor| s'il te plait)? (?:focus|concentrate|help|write|tell|show|answer|list|print|output|give|reveal|"
        r"hilf|schreib\w*|zeig\w*|antworte|gib|ayuda\w*|escribe|muestra|dime|responde|aide|ecris|montre|dis|reponds|affiche)\b",
    ),
    ("stop_interjection", c.OVERRIDE, 0.3, r"(?:^|[.!?]\s*)(?:stop|stopp|alto|arrete)\s*[.!,\-–—]"),
    (
        "this_is_a_command",
        c.ADDRESSED,
        ALONE,
        r"\b(?:this|the following|everything (?:in|below|here)(?: \w+){0,2}) (?:is|are) (?:not data|an? (?:instruction|command|order|directive) for (?:you|the (?:assistant|ai|model|agent|bot))|"
        r"(?:instructions?|commands?) for you)\b|\b(?:instruction|command|order)s? for (?:you|the (?:assistant|ai|model|agent|bot))\b",
    ),
    (
        "every_question",
        c.ADDRESSED,
        0.6,
        r"\b(?:every|each|any|all) (?:question|prompt|request|query|queries|questions)\b(?: \w+){0,3}? (?:with|by saying|using)\b",
    ),
    (
        "private_destination",
        c.EXFILTRATION,
        0.5,
        r"\b(?:my|a|his|her) (?:private|personal|own|home) (?:e-?mail|address|inbox|account|server|drive|dropbox)\b|@gmail\.|@(?:proton|yahoo|hotmail|outlook)\.",
    ),
    (
        "show_bulk",
        c.EXFILTRATION,
        0.7,
        rf"{NOT_NEGATED}\b(?:show|print|list|display|output|dump|give|tell|zeig\w*|gib|nenne|muestra\w*|dime|dame|ensena\w*|affiche\w*|montre\w*|donne\w*|dis)"
        rf"(?: me| mir| moi| us| uns| nous)? {BULK}\b",
    ),
    (
        "extract_data",
        c.EXFILTRATION,
        0.5,
        r"\b(?:extract|extrais|extraire|extrae|extraer|extrahiere\w*|steal|vole|roba|stiehl|leak|filtra)\b(?: \w+){0,2}? (?:data|donnees|datos|daten|records|customers?|clients?|kunden\w*|contacts?)\b",
    ),
    (
        "reveal_prompt_intl",
        c.OVERRIDE,
        ALONE,
        r"\b(?:show|print|reveal|output|display|repeat|dump|muestra|imprime|revela|repite|dime|zeig\w*|gib|drucke|wiederhole|affiche|montre|revele|repete)\b"
        r"(?: \w+){0,4}? (?:prompt|prompts|system prompt|instrucciones|anweisungen|consignes)\b(?! (?:payment|delivery|reply|response|attention|action|service|shipping))",
    ),
    (
        "html_image_query",
        c.EXFIL_URL,
        STRONG,
        r"<img\b[^>]{0,200}?\bsrc\s*=\s*[\"']?(?:https?:)?//[^\"'\s>?]{1,400}\?",
    ),
    (
        "hidden_html",
        c.INVISIBLE,
        0.5,
        r"display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?:px|pt|em)?\b|color\s*:\s*(?:#fff(?:fff)?|white)\b|<!--",
    ),
    (
        "your_summary",
        c.ADDRESSED,
        0.6,
        r"\b(?:in|to|into|at the (?:end|start|beginning|top|bottom) of|within|throughout) your (?:final )?(?:summary|analysis|report|results?|chart|charts|tables?)\b",
    ),
    (
        "despite_the_data",
        c.ADDRESSED,
        0.6,
        r"\bno matter what (?:the )?(?:data|numbers|figures|table|sheet|records?) (?:says?|shows?)\b|"
        r"\beven (?:though|if) (?:the )?(?:data|numbers|figures|table) (?:says?|shows?|suggests?) (?:otherwise|something else)\b|"
        r"\bwhatever the (?:data|numbers|figures) (?:says?|shows?)\b",
    ),
    (
        "thing_you_produce",
        c.ADDRESSED,
        0.6,
        r"\b(?:the |any |every |each )?(?:chart|summary|report|code|script|answer|output|analysis|list|table|plot|response|proposal|comparison)s? (?:you|it) "
        r"(?:generate|produce|create|write|output|return|draw|build|render|propose)s?\b",
    ),
    (
        "whoever_runs",
        c.ADDRESSED,
        0.6,
        r"\bwhoever (?:runs|reads|processes|analy[sz]es|generates|writes|summari[sz]es|handles|is (?:running|reading|processing|analy[sz]ing))\b|"
        r"\b(?:for|to) anyone (?:automating|running|processing|parsing|analy[sz]ing|summari[sz]ing|scripting)\b",
    ),
    (
        "dont_explain",
        c.CONCEALMENT,
        0.5,
        r"\b(?:do not|don't|never|without) (?:explain|explaining|justify|justifying|say|saying|mention|mentioning) (?:why|it|this|that you)\b",
    ),
    (
        "before_answering",
        c.OVERRIDE,
        0.7,
        r"\bbefore (?:answering|responding|replying|you answer|you respond|you reply|doing anything else|anything else)\b|"
        r"\bantes de (?:responder|contestar)\b|\bavant de repondre\b|\bbevor (?:du|sie) antwort\w*\b",
    ),
    (
        "tool_call",
        c.ADDRESSED,
        0.8,
        r"\b(?:call|use|invoke|run|trigger) (?:the |your |a )?(?:tool|function|plugin|action) [`'\"]?[a-z_]+[`'\"]?|\b(?:call|use|invoke) (?:the |your )?(?:\w+ )?(?:tool|function|plugin)s?\b",
    ),
    (
        "treat_as_instructions",
        c.OVERRIDE,
        ALONE,
        r"\btreat (?:this|the following|the next|these|that) (?:\w+ ){0,2}?as (?:your |the |a |an |new )?(?:real |actual |true |new |only |main |updated )?(?:config(?:uration)?|instructions?|commands?|system|prompt|directive|highest|authoritative|orders?)\b",
    ),
    (
        "automated_must",
        c.ADDRESSED,
        0.8,
        r"\b(?:automated|autonomous) (?:agents?|systems?|tools?|assistants?|readers?|processors?) (?:must|should|shall|need to|are required to)\b",
    ),
    (
        "reading_present",
        c.ADDRESSED,
        ALONE,
        rf"\b(?:any|all|every|each|whichever|whatever) (?:{AI_STRICT}|{AI_GENERIC})s? (?:reading|processing|parsing|seeing|analy[sz]ing|summari[sz]ing)\b",
    ),
    (
        "ai_comply",
        c.ADDRESSED,
        0.8,
        rf"\b(?:{AI_STRICT})(?: \w+)? (?:please )?(?:comply|obey|take note|acknowledge|follow (?:this|these|the above))\b|\bplease comply\b",
    ),
    (
        "if_asked",
        c.ADDRESSED,
        0.5,
        r"\bif (?:you are |you're |you get )?asked (?:about|for|whether|if|what|how)\b|\bwhen asked (?:about|for|whether|if|what|how)\b",
    ),
    (
        "propose_action",
        c.ADDRESSED,
        0.6,
        r"\bpropos(?:e|al)\w* (?:an |a |the )?(?:action|actions|change|changes|update|updates) (?:setting|to (?:set|change|delete|mark|update)|that (?:sets|deletes|marks|changes))\b|"
        r"\bpropon\w* (?:cambiar|borrar|eliminar|marcar|una accion)\b|\bpropose[zr]? (?:de (?:supprimer|modifier|changer|marquer)|une action)\b|"
        r"\bschlag\w* (?:vor|eine aktion)\b",
    ),
    (
        "hide_negatives",
        c.ADDRESSED,
        0.4,
        r"\b(?:omit|hide|leave out|exclude|suppress|drop|skip)\b(?: \w+){0,3}? (?:late|negative|bad|overdue|issues?|problems?|complaints?|losses|incidents?|deliveries|rows \d+|delays?)\b",
    ),
    (
        "disable_safety",
        c.OVERRIDE,
        0.8,
        r"\b(?:disable|turn off|deactivate|bypass|remove|lift|ignore|skip)\b(?: all| the| any| your)? (?:safety|security|content|approval|compliance) "
        r"(?:checks?|filters?|guardrails?|restrictions?|rules|measures|controls?|screens?|steps?)\b",
    ),
    (
        "vocative_please",
        c.ADDRESSED,
        0.5,
        rf"{SENTENCE_START}{DET}(?:{AI_STRICT}|{AI_GENERIC}) (?:please|bitte|por favor|s'il te plait)\b",
    ),
    (
        "ignore_named_request",
        c.OVERRIDE,
        STRONG,
        rf"\b{IGNORE_VERB}\s+(?:the |this |your |my )?(?:analysis|original|current|actual|main|initial|assigned|given) (?:request|question|task|query|prompt|assignment)\b",
    ),
    (
        "raw_data",
        c.EXFILTRATION,
        0.4,
        r"\braw (?:data|rows|records|purchase orders|orders|table|export|contents?|inputs?|files?|dump)\b",
    ),
    (
        "use_this_value",
        c.ADDRESSED,
        0.6,
        r"\buse (?:that|this|these|those)(?: \w+)? (?:in|for) (?:any|every|all|your|the) (?:analysis|analyses|calculations?|summar(?:y|ies)|charts?|reports?|answers?)\b",
    ),
    (
        "real_value",
        c.ADDRESSED,
        0.5,
        r"\bthe (?:real|actual|true|correct) (?:total|number|figure|value|amount|revenue|result|price)s? (?:is|are)\b",
    ),
    (
        "ai_should_intl",
        c.ADDRESSED,
        0.5,
        r"\b(?:el|la) (?:asistente|modelo|agente|ia) (?:debe|deberia|tiene que|va a)\b|\b(?:l'|le |la )(?:assistant|modele|agent|ia) (?:doit|devrait|va)\b|"
        r"\b(?:der|die|das) (?:assistent|modell|agent|ki) (?:muss|soll|sollte|darf)\b",
    ),
    (
        "ignore_this_row",
        c.OVERRIDE,
        0.4,
        r"\b(?:ignore|skip|exclude|drop|omit|ignorer|ignora|ignoriere|omite|saute)\w* (?:this|cette|esta|diese) (?:row|line|record|entry|ligne|fila|zeile|eintrag)\b",
    ),
    (
        "do_not_flag_intl",
        c.CONCEALMENT,
        0.5,
        r"\bne (?:pas )?(?:le |la |les )?(?:signaler|mentionner|rapporter)\b|\bsin (?:avisar|senalar|reportar)lo\b|\bno lo (?:senales|reportes|menciones)\b|"
        r"\bnicht (?:melden|erwahnen|markieren)\b",
    ),
    ("bracket_role", c.ROLE_MARKER, 0.6, r"\[/?(?:system|assistant|admin|developer)\]"),
    (
        "new_compound_instruction",
        c.OVERRIDE,
        0.6,
        r"\b(?:neue|neuen|aktualisierte) system(?:anweisung|instruktion|vorgabe)\w*\b",
    ),
    (
        "obey_instructions",
        c.OVERRIDE,
        ALONE,
        r"\b(?:obey|comply with)(?: only)? (?:the following|these|my|this|the new|all|every|any)(?: \w+)? (?:instructions?|commands?|orders?|rules|directives?)\b|"
        r"\byou (?:must|will|shall) (?:now )?obey\b",
    ),
    (
        "follow_my_instructions",
        c.OVERRIDE,
        0.6,
        r"\bfollow (?:only )?(?:the following|these|my|the new|only these|only my|the hidden)(?: \w+)? (?:instructions?|commands?|orders?|directions)\b",
    ),
    (
        "fake_header",
        c.ROLE_MARKER,
        0.8,
        r"(?:^|[\n.!?;(\[\-–—:])[ \t]*(?:system (?:notice|instruction)|developer (?:message|note)|admin (?:message|instruction)|"
        r"systemnachricht|mensaje del sistema|message systeme)\s*:",
    ),
    (
        "user_is_admin",
        c.CONCEALMENT,
        0.5,
        r"\bthe user (?:is|has been verified as) (?:an? |the )?(?:admin|administrator|developer|owner|root|superuser|authori[sz]ed)\b",
    ),
    (
        "rest_of_prompt",
        c.OVERRIDE,
        ALONE,
        r"\b(?:skip|ignore|disregard|forget)\b(?: \w+)? (?:rest|remainder) of (?:the |this |your )?(?:prompt|instructions|text|document|file|sheet|data|conversation)\b",
    ),
    (
        "enter_mode",
        c.OVERRIDE,
        ALONE,
        r"\b(?:enter|enable|activate|switch to|turn on|go into)\b(?: \w+)? (?:god|dan|unrestricted|jailbreak|jailbroken|sudo|audit bypass|no[- ]restrictions?) mode\b",
    ),
    (
        "script_injection",
        c.CODE_EXECUTION,
        STRONG,
        r"<script\b|\bjavascript:\s*\S|\bvbscript:\S|\bdata:text/html|\bonerror\s*=|\bonload\s*=|\bdrop table \w+\s*;|\btruncate table \w+\s*;",
    ),
    ("as_an_ai_de", c.ADDRESSED, 0.6, r"\bals (?:ki|ki-\w+|sprachmodell|kunstliche intelligenz|chatbot)\b"),
    (
        "object_then_ignore_de",
        c.OVERRIDE,
        0.8,
        r"\b(?:die|deine|ihre|alle|samtliche|bisherigen|vorherigen) (?:\w+ )?(?:anfrage|aufgabe|anweisung\w*|instruktion\w*|vorgaben|regeln|frage)"
        r" (?:\w+ )?(?:ignorieren|vergessen|missachten|ubergehen)\b",
    ),
    (
        "bulk_then_verb_de",
        c.EXFILTRATION,
        0.7,
        rf"{BULK} (?:\w+ ){{0,3}}?(?:ausgeben|ausgibst|anzeigen|zeigen|senden|schicken|ubermitteln|hochladen|weitergeben|exportieren|auflisten)\b",
    ),
    (
        "ignore_named_request_intl",
        c.OVERRIDE,
        STRONG,
        rf"\b{IGNORE_VERB}\s+(?:la |le |l'|el |die |de la |du )?(?:demande|question|requete|consigne|peticion|pregunta|solicitud|anfrage|aufgabe|frage)\w* "
        r"(?:initiale|originale|actuelle|d'origine|original|inicial|actual|del usuario|de l'utilisateur|ursprungliche)\b|"
        r"\b(?:ursprungliche|eigentliche|originale) (?:anfrage|aufgabe|frage) (?:\w+ )?(?:ignorieren|vergessen)\b",
    ),
    (
        "ignore_the_question",
        c.OVERRIDE,
        0.6,
        rf"\b{IGNORE_VERB}\s+(?:de )?(?:the |la |le |l'|el |die |de la )?(?:\w+'s? )?(?:question|request|task|query|demande|requete|pregunta|peticion|consulta|"
        r"frage|anfrage|tache|tarea)\b",
    ),
    (
        "ai_tool_label",
        c.ADDRESSED,
        ALONE,
        rf"(?:^|[\n.!?;,(\[\-–—][ \t]*+|\s{{2}})(?:(?:for|to|dear|attention|hey|hi) )?(?:any |all |every |the |dear )?(?:{AI_STRICT}|automated|autonomous) "
        r"(?:\w+ )?(?:tools?|systems?|models?|agents?|readers?|processors?|assistants?|scripts?|analysts?|parsers?)\s*[:,]",
    ),
    (
        "instead_of_requested",
        c.OVERRIDE,
        0.6,
        r"\binstead of (?:the |your )?(?:requested|asked|original|user'?s?|actual) (?:\w+ )?(?:chart|analysis|summary|task|report|answer|question|output|code)\b|"
        r"\b(?:change|switch) of plans?\b",
    ),
    (
        "granted_rights",
        c.CONCEALMENT,
        0.6,
        r"\byou (?:have been|were|are now) (?:granted|given|assigned) (?:full |elevated )?(?:admin|administrator|root|superuser|elevated|full) (?:rights|access|privileges|permissions)\b",
    ),
    (
        "ignore_policies_post",
        c.OVERRIDE,
        0.8,
        rf"\b{IGNORE_VERB}\s+(?:\S+\s+){{0,2}}?{POLICY_NOUN}\s+(?:\S+\s+)?(?:anterior(?:es)?|previas?|previos?|precedentes?|anterieure?s?|du systeme|del sistema|originales?|iniciales?)\b",
    ),
    (
        "generic_colon_you",
        c.ADDRESSED,
        0.6,
        rf"{SENTENCE_START}{DET}{AI_GENERIC}\s*:\s*(?:you|du|tu|vous|usted)\b",
    ),
    (
        "label_dash",
        c.ADDRESSED,
        ALONE,
        rf"(?:^|[\n.!?;(\[][ \t]*)(?:{AI_STRICT}|{AI_GENERIC}) (?:instructions?|directives?|anweisung\w*|instrucciones|consignes?)\s*(?:[-–—]\s|\s{{2}})",
    ),
    (
        "sandbox_inputs",
        c.EXFILTRATION,
        0.6,
        r"\b(?:inputs?|staging|staged) (?:folder|directory|dir|files?)\b|\binputs/|/data/input",
    ),
    (
        "role_line_sentence",
        c.ROLE_MARKER,
        ALONE,
        r"(?:^|\n)[ \t]*(?:assistant|ai|chatbot|gpt|chatgpt|claude|copilot|asistente|assistent)\s*:\s*"
        r"(?=(?:\S+\s+){3,}\S)(?=[^\n]*\b(?:the|is|are|was|were|will|i|you|to|and|of|here|have|has|your|my|this|that|we|it|el|la|es|der|die|ist|le|est)\b)",
    ),
    (
        "share_with_sender",
        c.EXFILTRATION,
        0.7,
        r"\b(?:with|to) the (?:sender|author|writer|owner) of this (?:note|message|e-?mail|row|cell|comment|text)\b",
    ),
    (
        "emails_you_draft",
        c.ADDRESSED,
        0.6,
        r"\b(?:any|every|all|each) (?:e-?mails?|messages?|letters?|replies) you (?:draft|write|send|compose|generate|prepare)\b",
    ),
    ("blind_copy", c.EXFILTRATION, 0.5, rf"\b(?:bcc|blind copy|blind-copy)\b[^\n]{{0,40}}?{EMAIL}"),
    (
        "tamper_output",
        c.ADDRESSED,
        0.6,
        r"\b(?:append|add|insert|write|include|hide|embed)\b(?: \S+){0,6}? (?:to|in|into) (?:the |your )?(?:output|results?|export(?:ed)?) (?:file|csv|chart|table|folder)s?\b",
    ),
]


AI_STEMS = (
    "ai$|ki$|ia$|llm|large|language|sprachmodell|modelo|modele|chat|gpt|claude|gemini|copilot|co-pilot|"
    "asistente|agente|assist|agent|virtual|autonomous|intelligen|inteligencia|kunstliche|artificial|pilot"
)
GENERIC_STEMS = "assist|asistent|agent|model|bot"
SECRET_STEMS = (
    "credential|password|passcode|api|access|secret|private|ssh|token|auth|bearer|session|cookie|environment|env|"
    "aws|connection|system|bank|credit|card|ssn|social|iban|personal|passworter|zugangsdaten|anmeldedaten|kennworter|"
    "contrasena|credenciales|claves|mots|identifiants|cles"
)
SEND_STEMS = (
    "send|upload|mail|email|post|transmit|forward|exfiltrat|leak|copy|export|sync|share|submit|dump|deliver|"
    "push|pipe|relay|transfer|paste|include|attach|write|schick|weitergeb|weiterleit|herausgeb|ubermittel|ubermittl|ubertrag|lade|laden|hochladen|"
    "leite|exportier|kopier|teile|veroffentlich|envia|envie|manda|mande|sube|suba|subir|reenvia|copia|"
    "comparte|publica|filtra|envoie|envoye|transmet|televers|telecharge|uploade|copie|partage|transfere|publie"
)
USER_STEMS = (
    "user|human|operator|reviewer|approver|benutzer|nutzer|anwender|usuario|usuaria|humano|operador|revisor|utilisat|"
    "humain|operateur|relecteur|approbateur|insu|requester|requestor"
)
INSTRUCTION_STEMS = (
    "instruction|prompt|direction|directive|guideline|guidance|guardrail|constraint|restriction|rule|command|"
    "programming|training|system|safety|content|anweisung|instruktion|befehl|regeln|vorgaben|richtlinien|anordnung|"
    "instruccion|indicaciones|reglas|directrices|pautas|ordenes|comandos|restricciones|consigne|regles|ordres|commandes|"
    "indications|angaben|systemanweisung|systeminstruktion"
)

# Each rule's gate: stems (matched at a word start; or anywhere, when the stem starts with punctuation) at least
# one of which every match of the rule contains. A cell is only tried against rules whose gate it contains,
# and the batch prefilter looks for the gates of every rule but "directive".
GATES: dict[str, str] = {
    "greeting_ai": AI_STEMS,
    "greeting_assistant": GENERIC_STEMS,
    "vocative_ai": AI_STEMS,
    "vocative_assistant": GENERIC_STEMS,
    "if_you_are_ai": AI_STEMS + "|" + GENERIC_STEMS + "|automated",
    "ai_reading_this": AI_STEMS,
    "agent_reading_this": GENERIC_STEMS,
    "ai_must": AI_STEMS,
    "when_processing_this": "when$|while$|before$|after$",
    "your_response": "your|cada|chaque|jeder|every|each$|all$|any$",
    "your_summary": "your",
    "your_output_weak": "your",
    "your_response_intl": "antwort|ausgabe|zusammenfassung|analyse|respuesta|salida|resumen|analisis|reponse|sortie|synthese|resume",
    "tell_the_user": USER_STEMS + "|reader",
    "ask_for_credentials": "ask$",
    "directive": "",
    "reveal_secrets": SECRET_STEMS,
    "steer_response": (
        "respond|reply|answer|say|state|report|output|conclude|claim|antworte|responde|repond|nothing|nichts|nada|rien|"
        "di$|decir|diga|digas|dire$|dis$|dites|sag$|sage$|sagen|must$"
    ),
    "bulk_tamper": "all$|every|each$|any$|alle$|jede|samtlich|todas$|todos$|toutes$|tous$",
    "unrestricted": "unrestricted|unfiltered|uncensored|without$|no$|ohne$|sin$|sans$",
    "i_want_you_to": "want$|need$",
    "ignore_instructions": INSTRUCTION_STEMS,
    "ignore_instructions_bare": INSTRUCTION_STEMS,
    "ignore_context": "message|context|conversation|assignment|task|aufgabe|kontext|tarea|contexto|mensaje|tache",
    "ignore_everything_above": "ignor|disregard|forget|vergiss|vergess|olvid|oubli",
    "from_now_on": "now$|point|henceforth|forward|sofort|jetzt|nun|ahora|adelante|maintenant|desormais|dorenavant",
    "from_now_on_you": "now$|point|henceforth|sofort|jetzt|nun|ahora|adelante|maintenant|desormais|dorenavant",
    "before_the_task": "before|bevor|antes|avant",
    "new_instructions": (
        "instruction|prompt|directive|objective|order|anweisung|instruktion|aufgabe|instruccion|tarea|consigne|tache"
    ),
    "your_real_task": (
        "task|goal|objective|instruction|job|mission|purpose|directive|priority|aufgabe|anweisung|tarea|mision|"
        "instruccion|tache"
    ),
    "you_are_now": "now$|jetzt|nun$|sofort|ahora|maintenant|desormais",
    "act_as": "act$|behave|respond|answer|pretend|role|want$|fais$|faites|joues|haz$|finge|actua|tu$|spiel|now$|you$|eres$|ahora|du$|jetzt|maintenant",
    "jailbreak": "jail|dan|anything|god|sudo|prompt",
    "developer_mode": "developer",
    "reveal_prompt": "prompt|instruction|rule|guideline|configuration|message|repeat",
    "system_prompt_words": "system|developer|initial|hidden",
    "hide_from_user": USER_STEMS,
    "hide_this_note": (
        "mention|reveal|disclose|acknowledge|repeat|quote|reference|refer$|erwahne|nenne$|menciones|mencione|reveles|"
        "revele|mentionne|revelez"
    ),
    "secretly": (
        "secret|covert|silent|quiet|discreet|stealth|without|behind|keep|heimlich|unbemerkt|stillschweig|escondid|"
        "nadie|personne"
    ),
    "preapproved": "user|admin|security|ciso|system|authori|permitted|allowed|cleared|no$",
    "send_bulk": (
        "all$|every|entire|full$|complete|whole$|each$|raw$|alle$|samtlich|gesamt|komplett|vollstandig|todos$|todas$|"
        "toda$|todo$|completa|completo|entera|entero|toute|tous$|ensemble|totalite|integralite"
    ),
    "send_secrets": SECRET_STEMS,
    "send_to_destination": SEND_STEMS,
    "data_into_url": "append|add|attach|include|encode|put|insert|concatenat|embed",
    "exfiltrate_word": "exfil",
    "code_literal": (
        "requests$|urllib|urlopen|socket|subprocess|os$|__import__|eval$|exec$|pty$|bin$|bash|sh$|powershell|cmd|nc$|"
        "ncat|netcat|curl|wget|rm$|chmod|base64|import|smtplib|ftplib|paramiko|invoke|iex$|fetch|xmlhttprequest|websocket|"
        "webclient"
    ),
    "open_connection": (
        "connect|socket|session|shell|tunnel|request|make$|verbindung|conexion|connexion|offne|baue|bauen|stelle|"
        "stellen"
    ),
    "run_command": (
        "run|execut|launch|spawn|invok|eval|start|open|download|fetch|curl|wget|pull|fuhre|ejecut|starte|inicia|lance"
    ),
    "install_package": "pip|npm|apt",
    "template_token": (
        "<\\||[inst|[/inst|<<|<start_of_turn|<end_of_turn|[system|[/system|[assistant|[/assistant|<system|</system|<assistant|"
        "</assistant|<sys|</sys|<instruction|</instruction|<admin|</admin|<im_start|</im_start"
    ),
    "inline_role_heading": "##",
    "user_tag": "<user|</user|<human|</human|<tool_call|</tool_call|<function_call|</function_call|[user|[/user",
    "markdown_role_heading": "##",
    "role_line_ai_reply": "assist|asistent|ai$|model|bot|chatbot|gpt",
    "role_line_system": "system|sistema",
    "role_dialogue": "user|human|usuario|utilisateur|benutzer|nutzer|system|sistema",
    "role_line": "assist|system|ai$|human|bot$",
    "json_role": "role",
    "fake_delimiter": "end|begin|start|===|---|***",
    "markdown_image_query": "![",
    "url_placeholder": "//",
    "capture_host": (
        "webhook|requestbin|pipedream|ngrok|burpcollaborator|oastify|interact|oast|pastebin|transfer|hookbin|beeceptor|"
        "requestcatcher|mockbin|canarytokens|discord|telegram|dnslog|ceye|postb|ptsv|trycloudflare|serveo|loca|"
        "requestinspector|hookdeck|webhookinbox|ipinfo"
    ),
    "url_sensitive_param": "//",
    "url_data_param": "//",
    "markdown_image": "![",
    "formula_fetch": "webservice|importxml|importdata|importhtml|importfeed|importrange|filterxml",
    "formula_image_dynamic": "image",
    "formula_image": "image",
    "formula_hyperlink_dynamic": "hyperlink",
    "formula_command": (
        "cmd|powershell|pwsh|mshta|rundll32|regsvr32|certutil|bitsadmin|wscript|cscript|msexcel|dde(|ddeauto|call(|exec(|register("
    ),
    "ignore_instructions_post": INSTRUCTION_STEMS,
    "instructions_void": INSTRUCTION_STEMS + "|guidance|told|given|asked|instructed",
    "whatever_you_were_told": (
        "told|given|asked|asks|instructed|said|says|wants|typed|types|wrote|writes|requested|requests|needs|forget|ignor|"
        "disregard|skip|oubli|olvid|vergiss|"
        "instructions|directions|commands|orders"
    ),
    "system_override": "override",
    "if_ai_reads": "reads$|reading|processes|processing|sees$|parses|analyses|analyzes|summarises|summarizes|ingests|handles|liest|verarbeitet|lee$|procesa|lit$|traite|read$|processed|parsed|analysed|analyzed|summarised|summarized",
    "automated_reader": "automated|autonomous|automatisierte|automatizad|automatises",
    "ai_should_generic": GENERIC_STEMS,
    "when_you_write": "when$",
    "regardless_of_data": "regardless",
    "send_data_to_url": SEND_STEMS,
    "secrets_then_send": SEND_STEMS,
    "harvest_secrets": "collect|gather|harvest|grab|extract|steal|read$|scrape|dump|exfiltrate|find$|search|look$|locate",
    "sensitive_path": "etc$|ssh$|id_rsa|aws$|bash_history|proc$|git$",
    "show_input_files": "content|contenu|inhalt|contenido",
    "skip_approval": "approval|review|confirmation|genehmigung|aprobacion|validation|approbation",
    "do_not_flag": "flag|report|highlight|raise|warn$|escalate",
    "takes_precedence": "priority|precedence|supersede|override|trump|outrank|replace|vorrang|prioridad|prevalece|priorite|prevaut|remplace",
    "your_rules": "your$|deine|ihre$|tus$|sus$|tes$|vos$",
    "guards_lifted": "confidentiality|restriction|safety|privacy|filter|guardrail|limits|limitations|compliance|content|safe$",
    "ignore_so_far": "ignor|disregard|forget|overrid|bypass|skip|discard|dismiss|vergiss|vergess|olvid|oubli|descart|omit|scrap|toss|ditch|throw|erase|delete|clear|wipe|reset|drop",
    "ignore_user_request": USER_STEMS + "|requester|analyst|utilisat|usuario|nutzers|benutzers|anwenders",
    "you_are_a_tool": "you$|you're|du$|sie$|eres$|tu$|vous$",
    "ai_label": AI_STEMS + "|" + GENERIC_STEMS,
    "granted_permission": "authori|permitted|allowed|cleared|told|instructed|gave|given|grant|permission|clearance",
    "paren_role": "assist|ai$|system|model|bot$|gpt|asistente",
    "exfiltrate_verb": "exfiltrate|markdown|image|img$|pixel",
    "http_request_to": "request|call$|calls$|peticion|solicitud|requete|anfrage|aufruf",
    "when_you_write_intl": "cuando|quand|wenn",
    "hide_from_user_fr": "en$|ne$",
    "ai_label_generic": GENERIC_STEMS,
    "whatever_model_reads": "whatever|whichever|any$|every|each$|all$",
    "as_an_ai": "as$",
    "prior_was_fake": "previous|prior|above|earlier|preceding|all$",
    "task_label": "task|objective|goal|instruction|mission|job$|tarea|tache|aufgabe|mision",
    "stop_what_you_do": "stop$",
    "no_need_to_show": "need$|already",
    "data_into_links": "append|add$|attach|include|encode|put$|insert|concatenat|embed",
    "correct_answer_is": "correct|right$|only$|expected|irrelevant",
    "hide_this_from_user": USER_STEMS + "|anyone|anybody|requester",
    "hide_from_user_intl": USER_STEMS,
    "chat_request": "need$|help|helfen|hilf|can$|tell|show|give|how$|answer|ich$|zeig|necesito|ayuda|dime|muestrame|besoin|aide|montre|dis$",
    "the_following_task": "following|folgende|siguiente|suivante|new$|neue|nueva|nouvelle|updated",
    "praise_then_pivot": "well$|very$|great|good$|nicely|excellent|congratulations|enough|sehr$|gut$|genugt|reicht|muy$|bien$|basta|tres$|bravo|suffit",
    "now_do": "now$|nun$|jetzt|ahora|maintenant",
    "stop_interjection": "stop|stopp|alto|arrete",
    "this_is_a_command": "this$|following|everything|instruction|command|order",
    "every_question": "every|each$|any$|all$",
    "private_destination": "private|personal|own$|home$|gmail|proton|yahoo|hotmail|outlook",
    "show_bulk": "show|print|list|display|output|dump|give|tell|zeig|gib|nenne|muestra|dime|dame|ensena|affiche|montre|donne|dis$",
    "extract_data": "extract|extrais|extraire|extrae|extraer|extrahier|steal|vole$|roba$|stiehl|leak|filtra",
    "reveal_prompt_intl": "prompt|instrucciones|anweisungen|consignes",
    "html_image_query": "<img",
    "hidden_html": "display|visibility|font|color|<!--",
    "despite_the_data": "matter|even$|whatever",
    "thing_you_produce": "chart|summar|report|code$|script|answer|output|analysis|list$|lists$|table|plot|response|proposal|comparison",
    "whoever_runs": "whoever|anyone",
    "dont_explain": "explain|justify|say$|saying|mention",
    "before_answering": "before|antes|avant|bevor",
    "tool_call": "tool|function|plugin|action",
    "treat_as_instructions": "treat",
    "automated_must": "automated|autonomous",
    "reading_present": "reading|processing|parsing|seeing|analysing|analyzing|summarising|summarizing",
    "ai_comply": "comply|obey|note$|acknowledge|" + AI_STEMS,
    "if_asked": "asked",
    "propose_action": "propos|propon|schlag",
    "hide_negatives": "omit|hide|leave|exclude|suppress|drop|skip",
    "disable_safety": "safety|security|content|approval|compliance",
    "vocative_please": AI_STEMS + "|" + GENERIC_STEMS,
    "ignore_named_request": "request|question|task|query|prompt|assignment",
    "raw_data": "raw$",
    "use_this_value": "use$",
    "real_value": "real$|actual$|true$|correct$",
    "ai_should_intl": "asistente|modelo|agente|ia$|assistant|modele|agent|assistent|modell|ki$",
    "ignore_this_row": "row$|line$|record|entry|ligne|fila$|zeile|eintrag",
    "do_not_flag_intl": "signaler|mentionner|rapporter|avisar|senalar|reportar|senales|reportes|menciones|melden|erwahnen|markieren",
    "bracket_role": "[system|[/system|[assistant|[/assistant|[admin|[/admin|[developer|[/developer",
    "new_compound_instruction": "neue$|neuen|aktualisierte",
    "obey_instructions": "obey|comply",
    "follow_my_instructions": "instruction|command|order|direction",
    "fake_header": "system|developer|admin|systemnachricht|mensaje|message",
    "user_is_admin": "user$",
    "rest_of_prompt": "rest$|remainder",
    "enter_mode": "enter|enable|activate|switch|turn$|go$",
    "script_injection": "<script|javascript|vbscript|html$|onerror|onload|drop$|truncate",
    "as_an_ai_de": "als$",
    "object_then_ignore_de": "ignorieren|vergessen|missachten|ubergehen",
    "bulk_then_verb_de": "ausgeben|ausgibst|anzeigen|zeigen|senden|schicken|ubermitteln|hochladen|weitergeben|exportieren|auflisten",
    "ignore_named_request_intl": "initiale|originale|actuelle|origine|original|inicial|actual$|usuario|utilisat|ursprungliche|eigentliche",
    "ignore_the_question": "question|request|task|query|demande|requete|pregunta|peticion|consulta|frage$|anfrage|tache|tarea",
    "ai_tool_label": "tool|system|model|agent|reader|processor|assistant|script|analyst|parser",
    "instead_of_requested": "instead|change|switch",
    "granted_rights": "granted|given|assigned",
    "ignore_policies": INSTRUCTION_STEMS,
    "ignore_policies_bare": INSTRUCTION_STEMS,
    "ignore_policies_post": INSTRUCTION_STEMS,
    "generic_colon_you": GENERIC_STEMS,
    "label_dash": AI_STEMS + "|" + GENERIC_STEMS,
    "sandbox_inputs": "input|inputs|staging|staged|data$",
    "role_line_sentence": "assist|asistent|ai$|chatbot|gpt|chatgpt|claude|copilot",
    "share_with_sender": "sender|author|writer|owner",
    "emails_you_draft": "you$",
    "blind_copy": "bcc|blind",
    "tamper_output": "output|result|export",
}


RULES: tuple[Rule, ...] = tuple(Rule(n, cat, w, re.compile(p, re.MULTILINE)) for n, cat, w, p in _RULES)


# Characters a rule cannot match without (any one of them); checked before the rule's regex runs.
REQUIRES: dict[str, str] = {
    "formula_fetch": "(",
    "formula_image_dynamic": "(",
    "formula_image": "(",
    "formula_hyperlink_dynamic": "(",
    "formula_command": "(|",
    "role_line_ai_reply": ":]",
    "role_line_sentence": ":",
    "role_line_system": ":",
    "role_dialogue": ":",
    "role_line": ":",
    "paren_role": ":",
    "json_role": ":",
    "inline_role_heading": ":",
    "vocative_ai": ",:!-–—",
    "vocative_assistant": ",!",
    "send_data_to_url": "/.",
    "http_request_to": "/.",
    "url_placeholder": "/",
    "url_sensitive_param": "=",
    "url_data_param": "=",
    "markdown_image_query": "?",
    "markdown_image": "]",
    "sensitive_path": "/_.",
}
