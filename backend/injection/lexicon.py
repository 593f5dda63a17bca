"""Multilingual concept lexicons: words that mark *what a text does*, whatever its language.

The learned model reads words and character n-grams, which tie it to the wording and the languages of its
training data. The concepts here are what an instruction planted for an assistant is made of in any language:
it speaks to the reader (second person, "please", an AI or "whoever processes this"), it names the reader's
task, tools or output (summary, answer, report, instructions), and it asks to write, send, change, delete, hide
or misreport something, often under a condition ("if you are summarising…") or dressed up as an automation
note. `concepts(token)` maps a folded token to its concept tags; the model adds the tags, and pairs of tags
present in a window, as features, so a weight learned on "send … to your summary" in English carries over to
"envoie … dans ta synthèse" and "把…发送到…".

Written for this project (English, German, French, Spanish, Italian, Portuguese, Dutch, Polish, Turkish,
Swedish, Japanese, Chinese) from general knowledge of the languages, before the intent corpus
(backend/injection_training/intents/) was written, and not tuned on it. The entries added with issue 25's
second scorer (second-person verb forms and Turkish/Polish endings, ROLE, summarise verbs, "oben" …) were
written after reading which corpus attacks the lexicons missed, so the corpus no longer tests them blind. Latin-script entries are folded like the scanner's text
(lower case, accents removed); an entry ending in "*" matches as a prefix (inflected forms: "send*" covers
"sende", "senden", "sendet"). CJK entries match as substrings of a CJK run, since those languages do not put
spaces between words.

FUNCTION_WORDS lists each language's commonest function words: the paraphrase split of the harness uses them
to tell content words from grammar, and `guess_language` uses them to put a text in a language.
"""

from __future__ import annotations

import re
from functools import lru_cache

from backend.injection.text import CJK_RE

# concept -> entries (Latin script, folded on load; "*" = prefix) and CJK entries (substrings)
_LATIN: dict[str, str] = {
    # an AI or automated reader named as the addressee
    "AI": """ai ia ki yz llm gpt chatgpt gemini copilot bot chatbot assistant* asistent* assistent* assistente*
        asystent* agent agente agents agenti agentes agentow ajan* model modelo modello modele modell modelu
        modelos modelli modeli language-model sprachmodell* taalmodel* jezykow* dil_modeli yapay zeka robot*
        kunstmatige intelligen* inteligencia inteligencja intelligence intelligenza inteligencja sztuczn*""",
    # whoever reads or processes this file: the reader as a role
    "READER": """whoever anyone reader* processing processor wer jeder leser* verarbeit* quiconque lecteur* traite
        traitement quien lector* procese procesa procesamiento chiunque lettore elabora elaborazione quem leitor*
        processa processamento iedereen lezer* verwerk* ktokolwiek czytaj* przetwarza* przetwarzani* okuyan
        isleyen kim kimse okuyucu* vem lasare* bearbetar* behandlar* whomever""",
    # second person: the text speaks to its reader
    "YOU": """you your yours yourself du dich dir dein deine deinen deinem deiner tu toi ton ta tes te vous votre vos
        tus tuyo usted ustedes ti tuo tua tuoi tue voi vostro vostra jij jouw jullie uw voce seu sua teu tua
        voces ty ciebie cie tobie twoj twoja twoje twojego pan pani panstwo sen seni sana senin siz sizi size
        sizin dig din ditt dina je jestes masz mozesz powinienes powinnas bist kannst hast wirst darfst
        sei stai hai puoi devi vuoi eres tienes puedes debes quieres podes deves peux dois veux bent kunt""",
    # a role or persona for the reader
    "ROLE": """role roles rolle rollen ruolo papel rola roli role rolu rolun* rolune rolde rollen persona*
        pretend* impersonat* fingi fingere finge finja fingir udawaj* wciel* davran* spela lats* roleplay""",
    # politeness and imperative markers
    "PLEASE": """please pls kindly bitte stp svp favor favore gentilmente alsjeblieft alstublieft aub
        gelieve prosze prosimy lutfen rica snalla vanligen""",
    # sending, exporting, sharing: data leaving
    "SEND": """send* sent email* e-mail* mail* forward* upload* post export* transfer* share* leak* exfiltrat*
        schick* versend* weiterleit* hochlad* lade uberweis* teile exportier* kopier* envo* envia*
        envie* transf* partag* televers* exporte* comparte* compart* reenvi* sube subir invia* inoltr* carica*
        condivid* esporta* trasferi* manda mande mandar mandem encaminh* compartilh* stuur* verstuur* doorsturen doorstuur*
        upload* deel* exporteer* overmak* wysl* przeslij* przesl* wyeksport* udostepn* gonder* ilet*
        yukle* paylas* aktar* skicka* vidarebefordra* ladda exportera* dela overfor*""",
    # writing, changing, setting a record or an output
    "CHANGE": """change* update* set sets modify* edit* mark* overwrite* replace* rewrite* write* approve* correct*
        adjust* assign* reassign* add insert* rename* fill* enter record* andern geandert aender* aktualisier* setz*
        markier* uberschreib* ersetz* schreib* genehmig* trage* eintrag* korrigier* modifi* mets mettre
        remplac* ecri* approuv* marque* corrig* ajout* attribu* cambi* actualiz* pon poner marca* sobrescrib*
        reemplaz* escrib* aproba* aprueb* corrig* asign* agreg* anad* aggiorn* imposta* segna* sovrascriv*
        sostitu* scriv* approva* corregg* assegn* aggiung* altera* atualiz* defin* substitu* escrev* aprov*
        atribu* adicion* wijzig* verander* aanpass* bijwerk* zet zetten markeer* overschrijf* vervang* schrijf*
        keur* toewijz* voeg* zmien* zaktualiz* ustaw* oznacz* nadpisz* zastap* zapisz* napisz* zatwierdz*
        przypisz* dodaj* wpisz* degistir* guncelle* ayarla* isaretle* uzerine onayla* ekle* andra*
        uppdatera* satt* markera* skriv* ersatt* godkann* tilldela* lagg*""",
    # deleting, removing records
    "DELETE": """delete* remove* erase* purge* drop wipe* losch* entfern* supprim* effac* retir* elimin* borra*
        quita* cancella* rimuov* elimina* apag* remov* verwijder* wis wissen usun* skasuj* wymaz* sil silin* silme* kaldir*
        bort radera*""",
    # hiding, leaving out, not mentioning
    "HIDE": """hide* conceal* omit* leave skip* exclude* suppress* secret* quiet* silent* mention* tell* inform verschweig* versteck* verberg* weglass* auslass* lass* erwahn* sag* verheimlich* ausschliess* cache cacher cachez omet* omis* exclu* mentionn* dis dites signal* ocult* omit* esconde* excluy* menciona* digas diga dile
        nascond* ometti* tralasci* esclud* menziona* dire dica* omita* escond* exclua* mencione* diga* conte
        verberg* verzwijg* weglat* laat noem* vermeld* zeg* ukryj* pomin* wyklucz* wspominaj* mow* informuj*
        gizle* atla atlayin haric* bahsetme* soyleme* belirtme* utelamn* utesluk* namna beratta*
        sag""",
    # stating something as fact in the output: misreporting
    "FALSIFY": """report* state* claim* say says describe* present* show* list* classify* label* rate* rank* ausweis*
        darstell* bezeichn* behaupt* einstuf* indique* declare* present* affirm* qualifi* classe* indica*
        declar* afirm* clasific* present* dichiar* afferm* riport* classific* indiqu* apresent* classifiq*
        rapporteer* vermeld* weergeven* presenteer* beoordeel* raportuj* podaj* przedstaw* okresl* zglos*
        klasyfik* raporla* bildir* goster* yaz* belirt* rapportera* ange angiv* redovisa* klassa* uppge*""",
    # the reader's task, tools and output
    "TASK": """summary summar* summaris* summariz* answer* response* output* report analysis analys* analyz*
        result* task* chart* table* dashboard* tool* code script* function* conclusion* overview* recap* digest
        zusammenfass* antwort* ausgabe* bericht* analyse auswert* ergebnis* aufgabe* werkzeug* synthese resume*
        reponse* sortie* rapport* tache* outil* bilan* resumen* respuesta* salida* informe* tarea* herramienta*
        riassunt* risposta* risultat* rapporto compito* strument* sintesi resumo* resposta* saida* relatorio*
        tarefa* ferramenta* samenvatting* antwoord* uitvoer* rapport verslag* taak* hulpmiddel* podsumowani*
        streszczeni* odpowiedz* wynik* raport zadani* narzedzi* analiz* ozet* cevap* yanit* cikti* rapor gorev*
        arac* analiz* sammanfattning* svar* utdata* rapport uppgift* verktyg* resultat* riassum* sintetizz*
        resum* samenvat* sammanfatta* podsumow* ozetl*""",
    # instructions, prompts, rules: the reader's orders
    "INSTR": """instruction* prompt* rule* guideline* directive* command* policy anweisung* regel* befehl*
        vorgab* weisung* consigne* regle* directive* commande* instrucci* regla* directiva* istruzion*
        regol* diretti* comand* instruc* regra* diretriz* instructie* regel* opdracht* bevel* richtlijn*
        instrukcj* polecen* zasad* regul* wytyczn* talimat* kural* komut* yonerge* emir instruktion* regler
        direktiv*""",
    # overriding: ignore, forget, instead
    "IGNORE": """ignore* disregard* forget* override* bypass* instead ignorier* vergiss* vergessen missacht* statt
        stattdessen ignor* oublie* oubli* olvid* dimentic* invece esquec* negeer* vergeet*
        zignoruj* zapomnij* zamiast yoksay* unut* yerine glom* strunta istallet""",
    # earlier text: previous, above, original
    "PRIOR": """previous prior above earlier original initial preceding vorherig* vorig* obig* bisherig* ursprunglich*
        frueher* precedent* ci-dessus anterior* arriba previo* original* precedent* sopra anterior* acima
        vorige eerder* bovenstaand* oorspronkelijk* poprzedni* wczesniej* powyzsz* pierwotn* onceki* yukaridaki
        ilk tidigare ovan ursprunglig* oben hierboven powyzej yukarida""",
    # conditions on the reader's situation: if / when
    "COND": """if when whenever once wenn falls sobald si cuando quand lorsque se quando als wanneer zodra indien
        jesli jezeli gdy kiedy eger ise om nar""",
    # dressed up as a system, automation or pipeline
    "AUTO": """automation* automated automatic* automatisch* automatique* automatico* automatic* automatisk* otomati*
        automatycz* system* sistema* systeem* systemu sistem* script* skrypt* betik pipeline* workflow*
        processing-rule bot bots job cron etl integration* integracj* entegrasyon* macro* makro* agenten
        processus proceso processo proces* islem* process* webhook""",
    # a note or notice marker
    "NOTE": """note notice attention important* urgent* hinweis* achtung wichtig* dringend* nota notiz avis
        importan* urgen* atencion atenzione attenzione aviso atencao opmerking* belangrijk* uwaga wazn* pilne
        dikkat onemli* acil obs viktig* bradskande""",
    # the staged material itself: this file, this row
    "THIS": """this these diese* dieser dieses diesen ce cet cette ces este esta estos estas esto questo questa
        questi queste isso isto deze dit ta tego tej tych bu bunu bunun bu_dosya denna detta dessa""",
    "FILE": """file* sheet* spreadsheet* table* export* dataset* document* row* cell* record* column* entry
        datei* tabelle* zeile* zelle* datensatz* dokument* spalte* fichier* feuille* tableau* ligne* cellule*
        colonne* archivo* hoja* tabla* fila* celda* registro* columna* documento* foglio* tabella* riga*
        cella* colonn* arquivo* planilha* tabela* linha* celula* coluna* bestand* blad* tabel* rij*
        kolom* plik* arkusz* tabel* wiersz* komork* kolumn* dokument* dosya* tablo* satir* hucre* sutun* kayit*
        belge* fil filen blad* tabell* rad raden cell* kolumn*""",
    # sensitive data and everything in it
    "DATA": """data datos dados dati dane donnees daten veri uppgift* all every entire full complete whole alle
        alles gesamt* komplett* vollstandig* tout tous toutes entier* complet* todo todos todas entera* completa*
        tutto tutti tutte intero completo inteir* volledig* hele heel wszystk* caly cala pelna tum tumu butun
        hepsi samtliga hela password* passwort* kennwort* mot_de_passe contrasen* senha* wachtwoord* haslo*
        hasla sifre* losenord* credential* zugangsdaten* identifiants* credencial* credenzial* inloggegevens*
        poswiadczeni* kimlik salar* gehalt* gehaelt* salaire* salario* stipend* salari* salaris* pensj*
        wynagrodz* maas* lon lonen customer* kunde* client* cliente* klant* klient* musteri* kund* contact*
        kontakt* contatt* contato* iletisim* apikey api key* token* secret* schlussel* cle clave* chiave*
        chave* sleutel* klucz* anahtar* nyckel*""",
    # must / always / never: the reader's obligations
    "MUST": """must should always never required mandatory need needs muss musst sollst immer niemals nie
        verpflichtend doit dois devez toujours jamais obligatoire debe debes siempre nunca obligatorio deve devi
        sempre mai obbligatorio precisa moet moeten altijd nooit verplicht musisz musi trzeba zawsze nigdy
        obowiazkow* zorunda gerek* gerekli asla daima maste alltid aldrig obligatorisk""",
    # a user / a person the reader serves
    "USER": """user* person human requester analyst* benutzer* nutzer* anwender* mensch utilisateur* personne
        humain usuario* persona humano utente* utenti persona umano usuario* pessoa humano gebruiker* mens
        uzytkownik* osoba czlowiek kullanici* kisi insan anvandare* manniska*""",
    # negation
    "NOT": """not no don't dont never nicht kein keine keinen nie ne pas jamais nunca non mai nao niet geen nooit
        nie zadn* degil yok hic asla inte ej aldrig""",
}

_CJK: dict[str, str] = {
    "AI": "AI 人工知能 アシスタント エージェント モデル ボット チャットボット 助手 人工智能 智能体 模型 机器人 大模型 语言模型 言語モデル",
    "READER": "処理する方 処理担当 読む方 読み込む 読んでいる 処理している 处理此 处理本 处理该 阅读本 阅读此 读取 处理的人 读到 看到这",
    "YOU": "あなた 貴方 君 お前 你 您 贵方",
    "PLEASE": "ください 下さい お願い 请 務必 务必 麻烦",
    "SEND": "送信 送って 送る 転送 アップロード 共有 メールで 送付 エクスポート 发送 发给 转发 上传 分享 导出 传给 寄给 邮件 外发",
    "CHANGE": "変更 更新 修正 書き換 上書き 設定 承認 記入 入力 置き換 マーク 修改 更改 改为 改成 设为 设置为 标记为 标为 批准 写入 填入 替换 覆盖 调整为",
    "DELETE": "削除 消して 消去 除去 删除 删掉 清除 移除",
    "HIDE": "隠 伏せ 省略 言及しない 触れない 伝えない 知らせない 報告しない 除外 載せない 書かない 含めない 隐藏 省略 不要提 不要告诉 不要报告 不要提及 不要写 略去 排除 不要包含 别提 瞒",
    "FALSIFY": "として報告 と記載 と書いて と答え と回答 と報告 と表示 と記述 报告为 写成 说成 声称 称为 列为 描述为 表述为 注明为",
    "TASK": "要約 まとめ 回答 返答 出力 レポート 報告書 分析 作業 タスク 集計 グラフ ツール 摘要 总结 汇总 回答 回复 输出 报告 分析 任务 图表 工具 结论",
    "INSTR": "指示 命令 プロンプト ルール 指令 提示词 规则 命令 说明书",
    "IGNORE": "無視 忘れ 代わりに 忽略 忘记 无视 代替 改为执行",
    "PRIOR": "以前 上記 前の 元の 最初の 之前 上述 以上 原来 原先 先前",
    "COND": "場合 なら ときは 時は 際は 如果 若 当你 假如 一旦",
    "AUTO": "自動 システム スクリプト ワークフロー パイプライン 自动 系统 脚本 流程 工作流 管道 机器处理",
    "NOTE": "注意 重要 お知らせ 備考 注記 提示 注意事项 备注 紧急 至急",
    "THIS": "この 此 这 该",
    "FILE": "ファイル シート 表 データセット セル 記録 レコード 文件 表格 工作表 数据集 单元格 记录 文档",
    "DATA": "データ 全て すべて 全部 顧客 名簿 一覧 リスト パスワード 認証情報 給与 連絡先 数据 所有 全部 客户 名单 列表 密码 凭证 工资 薪资 联系人 资料 密钥",
    "MUST": "必ず 常に 絶対 必须 务必 总是 一定",
    "USER": "ユーザー 利用者 担当者 使用者 用户 使用者 负责人",
    "ROLE": "役 ロール なりきって 振る舞 として振 扮演 角色 假装 冒充",
    "NOT": "ない 不 别 勿 禁止",
}

CONCEPTS = tuple(_LATIN)

FUNCTION_WORDS: dict[str, str] = {
    "en": "the a an and or of to in on at for with is are was be this that it as by from not but if you your we our",
    "de": "der die das und oder ein eine einen zu im in auf mit ist sind von den dem des nicht bitte fur fuer auch wenn sie wir ich es",
    "fr": "le la les un une et ou de du des en au aux pour avec est sont ce cette que qui pas ne il nous vous sur dans par",
    "es": "el la los las un una y o de del en para con es son que no por al se lo su sus este esta como",
    "it": "il lo la i gli le un una e o di del della in per con che non si al dei delle questo questa sono come",
    "pt": "o a os as um uma e ou de do da dos das em para com que nao no na por se seu sua este esta como",
    "nl": "de het een en of van in op met is zijn dat die niet voor aan te bij als er ook naar om dit deze",
    "pl": "i w na z do nie sie jest to ze o od po dla czy jak tak ale przez jesli ten ta te",
    "tr": "ve bir bu da de ile icin ne mi mu ama gibi olarak olan daha cok en her ya veya",
    "sv": "och i att det som en ett pa ar av for med till den inte om har de jag vi ni fran",
}


_LATIN_RUN = re.compile(r"[a-z]+")


def _fold(s: str) -> str:
    from backend.injection.text import fold

    return fold(s)


@lru_cache(maxsize=1)
def _tables() -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]], tuple[tuple[str, str], ...]]:
    exact: dict[str, set[str]] = {}
    prefix: dict[str, set[str]] = {}
    for concept, words in _LATIN.items():
        for w in words.split():
            w = _fold(w).replace("_", " ")
            if " " in w:  # multi-word entries are matched word by word: keep the first, most telling word
                w = w.split()[0]
            if w.endswith("*"):
                prefix.setdefault(w[:-1], set()).add(concept)
            else:
                exact.setdefault(w, set()).add(concept)
    cjk = tuple((_fold(e), concept) for concept, entries in _CJK.items() for e in entries.split())
    return (
        {k: frozenset(v) for k, v in exact.items()},
        {k: frozenset(v) for k, v in prefix.items()},
        cjk,
    )


_CACHE: dict[str, frozenset[str]] = {}
_EMPTY: frozenset[str] = frozenset()
# Second person carried by a verb's ending where the language drops the pronoun (Turkish "-sin", "-sun",
# "-sen", "-san" "if you …", "-siniz"; Polish "-esz", "-isz", "-asz", past "-łeś"/"-łaś"), read only on long
# words so short words of other languages do not match.
_YOU_ENDINGS_8 = ("sin", "sun", "yorsan", "yorsen", "ceksen", "caksan", "irsen", "irsan")
_YOU_ENDINGS_7 = ("siniz", "sunuz", "iniz", "unuz", "yorsun")
_YOU_ENDINGS_6 = ("esz", "isz", "asz", "ysz", "łes", "łas")


def concepts(token: str) -> frozenset[str]:
    """Concept tags of one folded token (empty for most tokens; cached)."""
    got = _CACHE.get(token)
    if got is not None:
        return got
    exact, prefix, cjk = _tables()
    tags: set[str] = set()
    if CJK_RE.search(token):
        for entry, concept in cjk:
            if entry in token:
                tags.add(concept)
        for run in _LATIN_RUN.findall(token):
            tags |= exact.get(run, _EMPTY)
    elif token.isalpha() or "-" in token or "'" in token:
        tags |= exact.get(token, _EMPTY)
        n = len(token)
        for k in range(3, n + 1):
            hit = prefix.get(token[:k])
            if hit:
                tags |= hit
        if n >= 6 and (
            token.endswith(_YOU_ENDINGS_6)
            or n >= 7
            and token.endswith(_YOU_ENDINGS_7)
            or n >= 8
            and token.endswith(_YOU_ENDINGS_8)
        ):
            tags.add("YOU")
    out = frozenset(tags) if tags else _EMPTY
    if len(_CACHE) < 200_000:
        _CACHE[token] = out
    return out


def clear_cache() -> None:
    _CACHE.clear()


@lru_cache(maxsize=1)
def _function_words() -> dict[str, frozenset[str]]:
    return {lang: frozenset(_fold(w) for w in words.split()) for lang, words in FUNCTION_WORDS.items()}


def is_function_word(token: str) -> bool:
    return any(token in ws for ws in _function_words().values())


def guess_language(text: str) -> str | None:
    """The language whose function words the text uses most (CJK: ja when it has kana, else zh); None when
    nothing tells."""
    if re.search(r"[\u3040-\u30ff]", text):
        return "ja"
    if re.search(r"[\u4e00-\u9fff]", text):
        return "zh"
    words = re.findall(r"\w+", _fold(text))
    best, best_n = None, 0
    for lang, ws in _function_words().items():
        n = sum(w in ws for w in words)
        if n > best_n:
            best, best_n = lang, n
    return best if best_n >= 2 else None
